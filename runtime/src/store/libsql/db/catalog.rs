//! Templates, agents and cross-workflow queries on the libSQL connection.

use libsql::{Row, Value};

use super::{Db, backend, get, listed, log_entry};
use crate::store::listing::{self, Dialect, TEMPLATE_COLUMNS};
use crate::store::{
    AgentRow, EventFilter, FoundEntry, StoreHealth, StoreResult, TemplateDraft, TemplateFilter,
    TemplateRow, WorkflowStatus,
};

/// Registers agent `?1` seen at `?2`, or notes it was seen again: its
/// time only moves forward (spec/store.md, "Agents").
pub(super) const SEE_AGENT: &str = "INSERT INTO agents (id, name, created_at, last_seen_at) \
    VALUES (?1, ?1, ?2, ?2) ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at \
    WHERE excluded.last_seen_at > agents.last_seen_at";

impl Db {
    /// Stores `draft` as the next version of its name, in one statement.
    pub fn define_template(&self, draft: &TemplateDraft) -> StoreResult<TemplateRow> {
        let sql = format!(
            "INSERT INTO workflow_templates (name, version, description, definition, \
             input_schema, output_schema, triggers, agent_id, created_at, updated_at) \
             SELECT ?1, COALESCE(MAX(version), 0) + 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8 \
             FROM workflow_templates WHERE name = ?1 RETURNING {TEMPLATE_COLUMNS}"
        );
        let params: Vec<Value> = vec![
            draft.name.as_str().into(),
            draft.description.as_str().into(),
            draft.definition.as_str().into(),
            draft.input_schema.clone().into(),
            draft.output_schema.clone().into(),
            draft.triggers.as_str().into(),
            draft.agent_id.clone().into(),
            draft.at.as_str().into(),
        ];
        let rows = self.block(self.query_all(&sql, params, template_row))?;
        rows.into_iter()
            .next()
            .ok_or_else(|| backend("the template insert returned no row"))
    }

    /// One version of a template, or its newest.
    pub fn template(&self, name: &str, version: Option<i64>) -> StoreResult<Option<TemplateRow>> {
        let mut sql = format!("SELECT {TEMPLATE_COLUMNS} FROM workflow_templates WHERE name = ?1");
        let mut params: Vec<Value> = vec![name.into()];
        if let Some(version) = version {
            sql.push_str(" AND version = ?2");
            params.push(version.into());
        }
        sql.push_str(" ORDER BY version DESC LIMIT 1");
        Ok(self
            .block(self.query_all(&sql, params, template_row))?
            .into_iter()
            .next())
    }

    /// Templates by name, newest version first.
    pub fn templates(&self, filter: &TemplateFilter) -> StoreResult<Vec<TemplateRow>> {
        let (sql, params) =
            listed(listing::templates(Dialect::Sqlite, filter).paged(filter.limit, filter.offset));
        self.block(self.query_all(&sql, params, template_row))
    }

    /// Log entries across workflows: one workflow's in log order, else
    /// newest first.
    pub fn find_entries(&self, filter: &EventFilter) -> StoreResult<Vec<FoundEntry>> {
        let (sql, params) = listed(listing::entries_page(Dialect::Sqlite, filter));
        self.block(self.query_all(&sql, params, |row| {
            Ok(FoundEntry {
                workflow_id: get(row, 0)?,
                entry: log_entry(row, 1)?,
            })
        }))
    }

    /// The agents, most recently seen first.
    pub fn agents(&self) -> StoreResult<Vec<AgentRow>> {
        let sql = "SELECT id, created_at, last_seen_at FROM agents ORDER BY last_seen_at DESC, id";
        self.block(self.query_all(sql, Vec::new(), |row| {
            Ok(AgentRow {
                id: get(row, 0)?,
                created_at: get(row, 1)?,
                last_seen_at: get(row, 2)?,
            })
        }))
    }

    /// How many workflows have each status.
    pub fn workflow_counts(&self) -> StoreResult<Vec<(WorkflowStatus, u64)>> {
        let sql = "SELECT status, COUNT(*) FROM workflows GROUP BY status ORDER BY status";
        self.block(self.query_all(sql, Vec::new(), |row| {
            let count: i64 = get(row, 1)?;
            Ok((get(row, 0)?, count as u64))
        }))
    }

    /// The schema version, journal mode, sync setting and newest run.
    pub fn health(&self) -> StoreResult<StoreHealth> {
        self.block(async {
            let text = |row: &Row| get::<String>(row, 0);
            let journal_mode = self
                .query_one("PRAGMA journal_mode", Vec::new(), text)
                .await?;
            let synchronous = self
                .query_one("PRAGMA synchronous", Vec::new(), |row| get::<i64>(row, 0))
                .await?
                .map(|level| {
                    match level {
                        0 => "off",
                        1 => "normal",
                        2 => "full",
                        _ => "extra",
                    }
                    .to_owned()
                });
            let sql = "SELECT (SELECT COALESCE(MAX(version), 0) FROM schema_version), \
                       (SELECT MAX(created_at) FROM workflows)";
            let (schema_version, newest_run_at) = self
                .query_one(sql, Vec::new(), |row| Ok((get(row, 0)?, get(row, 1)?)))
                .await?
                .unwrap_or_default();
            Ok(StoreHealth {
                schema_version,
                journal_mode,
                synchronous,
                newest_run_at,
                clock: crate::time::rfc3339(crate::time::now_ms()),
            })
        })
    }

    /// Registers an agent, or notes it was seen again.
    pub fn touch_agent(&self, id: &str, at: &str) -> StoreResult<()> {
        self.block(async {
            self.conn
                .execute(SEE_AGENT, vec![Value::from(id), at.into()])
                .await
                .map(|_| ())
                .map_err(backend)
        })
    }
}

fn template_row(row: &Row) -> StoreResult<TemplateRow> {
    Ok(TemplateRow {
        name: get(row, 0)?,
        version: get(row, 1)?,
        description: get(row, 2)?,
        definition: get(row, 3)?,
        input_schema: get(row, 4)?,
        output_schema: get(row, 5)?,
        triggers: get(row, 6)?,
        agent_id: get(row, 7)?,
        created_at: get(row, 8)?,
    })
}
