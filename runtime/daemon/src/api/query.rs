//! `opcode.query`: workflows, events, templates and decisions, filtered and
//! paged.

use opcode_vm::codes;
use serde_json::{Map, Value, json};

use super::args::Args;
use super::listing::{counted, workflow_filter};
use super::{Api, ToolError, ToolResult};
use opcode_runtime::store::{
    DecisionFilter, DecisionRow, DecisionStatus, EventFilter, FoundEntry, Listing, PrunedFilter,
    ScheduleRow, TemplateFilter, TemplateRow, WorkflowRow,
};

/// Rows per page unless `limit` says otherwise.
const DEFAULT_LIMIT: u32 = 50;
/// The most rows one page holds.
const MAX_LIMIT: u32 = 1000;

/// The filter keys each resource understands (beside `limit` and `offset`).
fn filter_keys(resource: &str) -> &'static [&'static str] {
    match resource {
        "workflows" => &[
            "status",
            "agent_id",
            "template_name",
            "parent_workflow_id",
            "since",
        ],
        "events" => &["workflow_id", "event_type", "step_id", "since"],
        "templates" => &["name", "agent_id", "latest"],
        "decisions" => &["status", "workflow_id", "agent_id"],
        "schedules" => &["template_name"],
        "plugins" => &["name"],
        "pruned" => &["workflow_id", "template_name"],
        "test_cases" => &[
            "workflow_id",
            "status",
            "agent_id",
            "template_name",
            "parent_workflow_id",
            "since",
        ],
        _ => &[],
    }
}

/// A filter key the resource does not know is an error, not silently
/// ignored (a typo would otherwise return everything).
fn check_filter_keys(resource: &str, filter: &Args) -> Result<(), ToolError> {
    let known = filter_keys(resource);
    if known.is_empty() {
        return Ok(());
    }
    match filter
        .keys()
        .find(|k| !known.contains(k) && !matches!(*k, "limit" | "offset"))
    {
        Some(key) => Err(ToolError::new(
            codes::R0122,
            format!(
                "`filter.{key}` is not a filter of {resource}: use {}",
                known.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// Handles `opcode.query`.
pub async fn query(api: &Api, args: &Args) -> ToolResult {
    let resource = args.str("resource")?;
    let filter = Args::new(
        args.opt_object("filter")?
            .map_or(Value::Null, |f| Value::Object(f.clone())),
    )?;
    check_filter_keys(resource, &filter)?;
    // `limit` and `offset` may sit beside `filter` or inside it (opcode).
    let limit = args
        .opt_count("limit")?
        .or(filter.opt_count("limit")?)
        .unwrap_or(DEFAULT_LIMIT)
        .min(MAX_LIMIT);
    let offset = args
        .opt_count("offset")?
        .or(filter.opt_count("offset")?)
        .unwrap_or(0);
    let text = |key: &str| -> Result<Option<String>, ToolError> {
        Ok(filter.opt_str(key)?.map(str::to_owned))
    };
    // Each resource's page and how many rows match in all.
    let (rows, total): (Vec<Value>, usize) = match resource {
        "workflows" => {
            let filter = workflow_filter(&filter, limit, offset)?;
            let rows = api.store().workflows(filter.clone()).await?;
            let total = counted(api, rows.len(), limit, offset, Listing::Workflows(filter)).await?;
            (rows.iter().map(workflow_json).collect(), total)
        }
        "test_cases" => super::test_cases::page(api, &filter, limit, offset).await?,
        "events" => {
            let filter = EventFilter {
                workflow_id: text("workflow_id")?,
                event_type: text("event_type")?,
                step_id: text("step_id")?,
                since: text("since")?,
                limit: Some(limit),
                offset,
            };
            let found = api.store().find_entries(filter.clone()).await?;
            let total = counted(api, found.len(), limit, offset, Listing::Entries(filter)).await?;
            (found.iter().map(event_json).collect(), total)
        }
        "templates" => {
            let filter = TemplateFilter {
                name: text("name")?,
                agent_id: text("agent_id")?,
                latest_only: filter.opt_bool("latest")?.unwrap_or(false),
                limit: Some(limit),
                offset,
            };
            let rows = api.store().templates(filter.clone()).await?;
            let total = counted(api, rows.len(), limit, offset, Listing::Templates(filter)).await?;
            (rows.iter().map(template_json).collect(), total)
        }
        "decisions" => {
            let status = match text("status")?.as_deref() {
                None => Some(DecisionStatus::Pending),
                Some("all") => None,
                Some(other) => Some(DecisionStatus::parse(other).ok_or_else(|| {
                    let known: Vec<&str> =
                        DecisionStatus::ALL.iter().map(|s| s.as_str()).collect();
                    ToolError::new(
                        codes::R0122,
                        format!(
                            "`filter.status` `{other}` is not a decision status; one of: {}, or all",
                            known.join(", ")
                        ),
                    )
                })?),
            };
            let filter = DecisionFilter {
                workflow_id: text("workflow_id")?,
                status,
                agent_id: text("agent_id")?,
                limit: Some(limit),
                offset,
            };
            let rows = api.store().decision_page(filter.clone()).await?;
            let total = counted(api, rows.len(), limit, offset, Listing::Decisions(filter)).await?;
            (rows.iter().map(decision_json).collect(), total)
        }
        "schedules" => {
            let template = text("template_name")?;
            let rows = api.store().schedules().await?;
            let kept: Vec<Value> = rows
                .iter()
                .filter(|s| {
                    template.is_none() || template.as_deref() == Some(s.template_name.as_str())
                })
                .map(schedule_json)
                .collect();
            paged(kept, offset, limit)
        }
        "pruned" => {
            let filter = PrunedFilter {
                id: text("workflow_id")?,
                template_name: text("template_name")?,
                limit: Some(limit),
                offset,
            };
            let rows = api.store().pruned(filter.clone()).await?;
            let total = counted(api, rows.len(), limit, offset, Listing::Pruned(filter)).await?;
            (rows.iter().map(super::pruned_json).collect(), total)
        }
        "plugins" => {
            let name = text("name")?;
            let reports = api.plugins.as_ref().map(|p| p.report()).unwrap_or_default();
            let kept: Vec<Value> = reports
                .into_iter()
                .filter(|p| name.is_none() || p["name"].as_str() == name.as_deref())
                .collect();
            paged(kept, offset, limit)
        }
        other => {
            return Err(ToolError::new(
                codes::R0122,
                format!(
                    "unknown resource `{other}`: use workflows, events, templates, decisions, schedules, plugins, pruned or test_cases"
                ),
            ));
        }
    };
    let mut out = Map::new();
    out.insert("count".into(), rows.len().into());
    out.insert("total".into(), total.into());
    out.insert(
        "has_more".into(),
        (offset as usize + rows.len() < total).into(),
    );
    out.insert("limit".into(), limit.into());
    out.insert("offset".into(), offset.into());
    out.insert(resource.to_owned(), Value::Array(rows));
    Ok(Value::Object(out))
}

/// One page of rows listed in memory, and how many there are.
fn paged(rows: Vec<Value>, offset: u32, limit: u32) -> (Vec<Value>, usize) {
    let total = rows.len();
    let page = rows
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .collect();
    (page, total)
}

/// Stored JSON text as a value (text that is not JSON stays a string).
pub fn parsed(text: Option<&str>) -> Value {
    text.map_or(Value::Null, |t| {
        serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_owned()))
    })
}

/// A workflow row as a query result.
pub fn workflow_json(w: &WorkflowRow) -> Value {
    json!({
        "id": w.id,
        "name": w.name,
        "template_name": w.template_name,
        "template_version": w.template_version,
        "status": w.status,
        "agent_id": w.agent_id,
        "parent_workflow_id": w.parent_id,
        "input_params": parsed(Some(&w.inputs)),
        "output": parsed(w.output.as_deref()),
        "error": parsed(w.error.as_deref()),
        "created_at": w.created_at,
        "started_at": w.started_at,
        "completed_at": w.completed_at,
        "updated_at": w.updated_at,
    })
}

/// A log entry as a query result.
pub fn event_json(f: &FoundEntry) -> Value {
    let e = &f.entry;
    json!({
        "workflow_id": f.workflow_id,
        "sequence": e.seq,
        "timestamp": e.at,
        "kind": e.kind.as_str(),
        "event_type": e.event_type,
        "step_id": e.step_id,
        "payload": parsed(Some(&e.payload)),
    })
}

/// A template version as a query result.
pub fn template_json(t: &TemplateRow) -> Value {
    let source = parsed(Some(&t.definition));
    json!({
        "name": t.name,
        "version": format!("v{}", t.version),
        "version_number": t.version,
        "description": t.description,
        "definition": source.get("definition").cloned().unwrap_or(source.clone()),
        "input_schema": parsed(t.input_schema.as_deref()),
        "output_schema": parsed(t.output_schema.as_deref()),
        "triggers": parsed(Some(&t.triggers)),
        "agent_id": t.agent_id,
        "created_at": t.created_at,
    })
}

/// A decision as a query result.
pub fn decision_json(d: &DecisionRow) -> Value {
    json!({
        "workflow_id": d.workflow_id,
        "id": d.id,
        "step_id": d.step_id,
        "prompt": d.prompt,
        "context": parsed(Some(&d.context)),
        "options": parsed(Some(&d.options)),
        "fallback": d.fallback,
        "target_agent_id": d.target_agent,
        "timeout_at": d.timeout_at,
        "status": d.status,
        "resolution": parsed(d.resolution.as_deref()),
        "resolved_by": d.resolved_by,
        "resolved_at": d.resolved_at,
        "created_at": d.created_at,
    })
}

/// A scheduled job as a query result.
pub fn schedule_json(s: &ScheduleRow) -> Value {
    json!({
        "id": s.id,
        "template_name": s.template_name,
        "template_version": s.template_version,
        "cron_expression": s.cron,
        "timezone": s.timezone,
        "params": parsed(Some(&s.params)),
        "agent_id": s.agent_id,
        "enabled": s.enabled,
        "missed": s.missed,
        "last_run_at": s.last_run_at,
        "next_run_at": s.next_run_at,
        "last_run_status": s.last_run_status,
        "last_workflow_id": s.last_workflow_id,
        "origin": s.origin,
        "created_at": s.created_at,
    })
}
