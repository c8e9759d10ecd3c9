//! A workflow's state as one JSON object, read from the store's derived
//! tables: what `opcode status` prints and the daemon returns (the run
//! view of `spec/mcp.md`).
//!
//! `{workflow_id, name, status, step_counts, output, error,
//! pending_decisions, started_at, completed_at}` always (a field with
//! nothing to say left out), and by [`View`] `inputs` and `steps: {name:
//! {status, attempts, started_at, completed_at, duration_ms, error,
//! output}}` in DAG order. A value larger than the view's inline limit is
//! replaced by `{bytes, uri}`, the `opcode://` resource that reads it.

use std::cmp::Ordering;

use opcode_vm::Program;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value, json};

use crate::store::{DecisionRow, EventStore, StepRow, StoreError, WorkflowState};

/// What a summary shows beyond the essentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Each step instance (`steps`).
    pub steps: bool,
    /// Each step's output in `steps`.
    pub outputs: bool,
    /// The run's inputs.
    pub inputs: bool,
    /// Only these steps (and their loop instances); empty: all.
    pub only: Vec<String>,
    /// Values whose JSON is longer are replaced by `{bytes, uri}`.
    pub inline_limit: Option<usize>,
    /// The step ids in DAG order ([`opcode_vm::Program::step_order`]);
    /// steps missing from it come last, by name.
    pub order: Vec<String>,
}

impl View {
    /// Everything inline: steps with their outputs (the CLI's reports).
    pub fn full() -> View {
        View {
            steps: true,
            outputs: true,
            ..View::default()
        }
    }

    /// Does the view show step instances?
    pub fn shows_steps(&self) -> bool {
        self.steps || self.outputs || !self.only.is_empty()
    }

    /// Does the view keep step instance `name` (`fetch`, `fetch[2]`)?
    pub fn keeps(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|id| id == base_id(name))
    }
}

/// A summary without its clock readings: what two runs of the same
/// workflow with the same inputs and answers must agree on, whenever they
/// ran (a run recovered after a crash reads the clock again).
pub fn untimed(summary: &Value) -> Value {
    const TIMES: [&str; 5] = [
        "created_at",
        "started_at",
        "completed_at",
        "duration_ms",
        "timeout_at",
    ];
    match summary {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !TIMES.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), untimed(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(untimed).collect()),
        other => other.clone(),
    }
}

/// The summary of workflow `id`, or `None` if there is no such workflow.
pub async fn summary(
    store: &dyn EventStore,
    id: &str,
    view: &View,
) -> Result<Option<Value>, StoreError> {
    match store.state(id).await? {
        Some(state) => Ok(Some(ordered_summary(store, &state, view).await?)),
        None => Ok(None),
    }
}

/// The summary of `state`, its steps in the DAG order of its stored
/// program when the view shows steps and gives no order, and the
/// decisions its child runs wait for when they hold it.
pub async fn ordered_summary(
    store: &dyn EventStore,
    state: &WorkflowState,
    view: &View,
) -> Result<Value, StoreError> {
    let mut out = in_order(store, state, view).await?;
    add_held(store, state, view, &mut out).await?;
    Ok(out)
}

/// Runs below `id` (children, their children…) that are suspended, each
/// with its pending decisions (none when it waits for a signal).
pub async fn waiting_below(
    store: &dyn EventStore,
    id: &str,
) -> Result<Vec<(String, Vec<DecisionRow>)>, StoreError> {
    let waiting = waiting_via(store, id).await?;
    Ok(waiting
        .into_iter()
        .map(|(_, run, decisions)| (run, decisions))
        .collect())
}

/// [`waiting_below`], each run with the child of `id` it is below (or is).
async fn waiting_via(
    store: &dyn EventStore,
    id: &str,
) -> Result<Vec<(String, String, Vec<DecisionRow>)>, StoreError> {
    let mut out = Vec::new();
    let mut parents = vec![(id.to_owned(), None)];
    while let Some((parent, via)) = parents.pop() {
        let filter = crate::store::WorkflowFilter {
            parent_id: Some(parent),
            ..Default::default()
        };
        for child in store.workflows(filter).await? {
            if child.status.is_ended() {
                continue;
            }
            let via: String = via.clone().unwrap_or_else(|| child.id.clone());
            if child.status == crate::store::WorkflowStatus::Suspended {
                let pending = store
                    .decisions(Some(&child.id), Some(crate::store::DecisionStatus::Pending))
                    .await?;
                out.push((via.clone(), child.id.clone(), pending));
            }
            parents.push((child.id, Some(via)));
        }
    }
    Ok(out)
}

/// The signals run `id`'s wait steps take, by name and by step id (a
/// signal matches a wait step by either), sorted; `None` when its program
/// cannot be read.
pub async fn awaitable_signals(
    store: &dyn EventStore,
    id: &str,
) -> Result<Option<Vec<String>>, StoreError> {
    let Some(row) = store.workflow(id).await? else {
        return Ok(None);
    };
    let program = store
        .source(&row.source_hash)
        .await?
        .and_then(|source| Program::from_bytes(&source.program).ok());
    Ok(program.map(|program| {
        let mut names: Vec<String> = program
            .awaited_signals()
            .into_iter()
            .flat_map(|(step, name)| [name.to_owned(), step.to_owned()])
            .collect();
        names.sort();
        names.dedup();
        names
    }))
}

/// The run that a signal named `name` sent to run `id` is for: `id` when
/// one of its wait steps waits for it (or when none below does), else the
/// first suspended run below `id` whose wait step does (spec/mcp.md,
/// "Decisions of child runs").
pub async fn signal_target(
    store: &dyn EventStore,
    id: &str,
    name: &str,
) -> Result<String, StoreError> {
    let Some(own) = store.state(id).await? else {
        return Ok(id.to_owned());
    };
    if awaits_signal(store, &own, name).await? {
        return Ok(id.to_owned());
    }
    for (child, _) in waiting_below(store, id).await? {
        if let Some(state) = store.state(&child).await?
            && awaits_signal(store, &state, name).await?
        {
            return Ok(child);
        }
    }
    Ok(id.to_owned())
}

/// Does a suspended wait step of `state` wait for the signal `name` (by
/// its name, or by the step's own)?
async fn awaits_signal(
    store: &dyn EventStore,
    state: &WorkflowState,
    name: &str,
) -> Result<bool, StoreError> {
    let suspended: Vec<&StepRow> = state
        .steps
        .iter()
        .filter(|s| s.status == opcode_vm::StepStatus::Suspended)
        .collect();
    if suspended.is_empty() {
        return Ok(false);
    }
    if suspended.iter().any(|s| s.step_id == name) {
        return Ok(true);
    }
    let program = store
        .source(&state.workflow.source_hash)
        .await?
        .and_then(|source| Program::from_bytes(&source.program).ok());
    let Some(program) = program else {
        return Ok(false);
    };
    let wanted = |row: &StepRow| {
        let id = base_id(row.step_id.rsplit('/').next().unwrap_or(&row.step_id));
        let step = program.step_by_id(id)?;
        let code = &program.steps.get(step as usize)?.code;
        program.code[code.start as usize..code.end as usize]
            .iter()
            .find_map(|instr| match instr {
                opcode_vm::instr::Instr::AwaitSignal { name, .. } => Some(name.clone()),
                _ => None,
            })
    };
    Ok(suspended.iter().any(|s| wanted(s).as_deref() == Some(name)))
}

/// The pending decision `step` names (its id, else its step id), asked by
/// run `id` or by a suspended run below it: the run that asks and the
/// decision; when none does, a message naming those pending there.
pub async fn find_pending(
    store: &dyn EventStore,
    id: &str,
    step: &str,
) -> Result<Result<(String, DecisionRow), String>, StoreError> {
    let own = store
        .decisions(Some(id), Some(crate::store::DecisionStatus::Pending))
        .await?;
    let runs = std::iter::once((id.to_owned(), own)).chain(waiting_below(store, id).await?);
    let mut seen = Vec::new();
    for (run, pending) in runs {
        let found = pending
            .iter()
            .find(|d| d.id == step)
            .or_else(|| pending.iter().find(|d| d.step_id == step));
        if let Some(found) = found {
            return Ok(Ok((run, found.clone())));
        }
        seen.extend(pending.into_iter().map(|d| d.id));
    }
    Ok(Err(if seen.is_empty() {
        format!("workflow `{id}` has no pending decision")
    } else {
        format!("no pending decision `{step}`; pending: {}", seen.join(", "))
    }))
}

/// An active run whose running steps all wait on suspended child runs
/// (waiting for decisions or signals), or for answers to questions their
/// actions asked (spec/agents.md, "Permission requests"), is held by
/// them: it reads as `suspended`, `waiting_runs` names the runs, and their
/// decisions are its `pending_decisions`, each with its run's
/// `workflow_id` (spec/mcp.md, "Decisions of child runs").
async fn add_held(
    store: &dyn EventStore,
    state: &WorkflowState,
    view: &View,
    out: &mut Value,
) -> Result<(), StoreError> {
    let id = &state.workflow.id;
    let running: Vec<&StepRow> = state
        .steps
        .iter()
        .filter(|s| s.status == opcode_vm::StepStatus::Running)
        .collect();
    if state.workflow.status != crate::store::WorkflowStatus::Active || running.is_empty() {
        return Ok(());
    }
    let waiting = waiting_via(store, id).await?;
    let asks = |step: &StepRow| {
        state
            .pending_decisions
            .iter()
            .any(|d| opcode_vm::event::asking_step(&d.id) == Some(step.step_id.as_str()))
    };
    let holds = |step: &StepRow| {
        let started = |child: &String| {
            (1..=step.attempt.max(1)).any(|attempt| {
                let key = format!("{id}/{}/{attempt}", step.step_id);
                opcode_stdlib::exec::started_by(child, &key)
            })
        };
        asks(step) || waiting.iter().any(|(via, _, _)| started(via))
    };
    if running.iter().all(|s| holds(s)) {
        out["status"] = json!("suspended");
    }
    if waiting.is_empty() {
        return Ok(());
    }
    let runs: Vec<&String> = waiting.iter().map(|(_, run, _)| run).collect();
    out["waiting_runs"] = json!(runs);
    let mut pending: Vec<Value> = out["pending_decisions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (_, child, decisions) in &waiting {
        for d in decisions {
            let mut shown = decision(child, d, view.inline_limit);
            shown["workflow_id"] = json!(child);
            pending.push(shown);
        }
    }
    if !pending.is_empty() {
        out["pending_decisions"] = Value::Array(pending);
    }
    Ok(())
}

/// The summary of `state`, its steps in the DAG order of its stored program
/// when the view shows steps and gives no order.
async fn in_order(
    store: &dyn EventStore,
    state: &WorkflowState,
    view: &View,
) -> Result<Value, StoreError> {
    if !view.shows_steps() || !view.order.is_empty() {
        return Ok(of_state(state, view));
    }
    let program = store
        .source(&state.workflow.source_hash)
        .await?
        .and_then(|source| Program::from_bytes(&source.program).ok());
    let order = program.map_or_else(Vec::new, |p| {
        p.step_order().into_iter().map(str::to_owned).collect()
    });
    Ok(of_state(
        state,
        &View {
            order,
            ..view.clone()
        },
    ))
}

/// The summary of a workflow's state as read.
pub fn of_state(state: &WorkflowState, view: &View) -> Value {
    let row = &state.workflow;
    let limit = view.inline_limit;
    let uri = |path: &str| run_uri(&row.id, path);
    let mut out = Map::new();
    out.insert("workflow_id".into(), json!(row.id));
    if !row.name.is_empty() {
        out.insert("name".into(), json!(row.name));
    }
    out.insert("status".into(), json!(row.status));
    out.insert("step_counts".into(), step_counts(&state.steps));
    put(
        &mut out,
        "output",
        stored(row.output.as_deref(), limit, || uri("output")),
    );
    put(
        &mut out,
        "error",
        stored(row.error.as_deref(), limit, || uri("error")),
    );
    if !state.pending_decisions.is_empty() {
        let pending = state
            .pending_decisions
            .iter()
            .map(|d| decision(&row.id, d, limit))
            .collect();
        out.insert("pending_decisions".into(), Value::Array(pending));
    }
    put(
        &mut out,
        "started_at",
        row.started_at.clone().map(Value::String),
    );
    put(
        &mut out,
        "completed_at",
        row.completed_at.clone().map(Value::String),
    );
    if view.inputs {
        put(
            &mut out,
            "inputs",
            stored(Some(&row.inputs), limit, || uri("inputs")),
        );
    }
    if view.shows_steps() {
        let mut steps = Map::new();
        for step in ordered(&state.steps, &view.order) {
            if view.keeps(&step.step_id) {
                steps.insert(step.step_id.clone(), step_json(&row.id, step, view));
            }
        }
        out.insert("steps".into(), Value::Object(steps));
    }
    Value::Object(out)
}

/// The `opcode://` URI of `path` under run `id` (`output`, `steps/x/output`).
pub fn run_uri(id: &str, path: &str) -> String {
    format!("opcode://runs/{}/{path}", segment(id))
}

/// `text` as one URI path segment (`fetch[2]` → `fetch%5B2%5D`).
pub fn segment(text: &str) -> String {
    /// Kept as they are: RFC 3986's unreserved characters.
    const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    utf8_percent_encode(text, RESERVED).to_string()
}

/// Stored JSON text as a value, or `{bytes, uri}` when longer than
/// `limit` (text that is not JSON stays a string); `None` when absent.
pub fn stored(
    text: Option<&str>,
    limit: Option<usize>,
    uri: impl FnOnce() -> String,
) -> Option<Value> {
    let text = text?;
    if limit.is_some_and(|limit| text.len() > limit) {
        return Some(json!({ "bytes": text.len(), "uri": uri() }));
    }
    Some(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())))
}

/// The step instances in DAG order: by their step's place in `order`,
/// then by loop index (`fetch[2]` before `fetch[10]`).
pub fn ordered<'a>(steps: &'a [StepRow], order: &[String]) -> Vec<&'a StepRow> {
    let rank = |name: &str| {
        let id = base_id(name);
        order.iter().position(|o| o == id).unwrap_or(order.len())
    };
    let mut sorted: Vec<&StepRow> = steps.iter().collect();
    sorted.sort_by(|a, b| {
        rank(&a.step_id)
            .cmp(&rank(&b.step_id))
            .then_with(|| base_id(&a.step_id).cmp(base_id(&b.step_id)))
            .then_with(|| compare_indices(&a.step_id, &b.step_id))
    });
    sorted
}

/// The step id of an instance name (`fetch[1,2]` → `fetch`).
fn base_id(name: &str) -> &str {
    name.split_once('[').map_or(name, |(id, _)| id)
}

/// Instance names of one step by their loop indices, numerically.
fn compare_indices(a: &str, b: &str) -> Ordering {
    let indices = |name: &str| -> Vec<u64> {
        name.split_once('[')
            .map(|(_, rest)| {
                rest.trim_end_matches(']')
                    .split(',')
                    .filter_map(|i| i.trim().parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    indices(a).cmp(&indices(b))
}

/// How many step instances are in each status, in the statuses' order.
fn step_counts(steps: &[StepRow]) -> Value {
    let mut counts: Vec<(opcode_vm::StepStatus, u64)> = Vec::new();
    for step in steps {
        match counts.iter_mut().find(|(s, _)| *s == step.status) {
            Some((_, n)) => *n += 1,
            None => counts.push((step.status, 1)),
        }
    }
    counts.sort_by_key(|(status, _)| *status as u8);
    let map: Map<String, Value> = counts
        .into_iter()
        .map(|(status, n)| (status_name(status), json!(n)))
        .collect();
    Value::Object(map)
}

fn status_name(status: opcode_vm::StepStatus) -> String {
    match serde_json::to_value(status) {
        Ok(Value::String(name)) => name,
        _ => format!("{status:?}").to_lowercase(),
    }
}

/// One step instance.
fn step_json(run: &str, step: &StepRow, view: &View) -> Value {
    let limit = view.inline_limit;
    let uri = |what: &str| run_uri(run, &format!("steps/{}/{what}", segment(&step.step_id)));
    let mut out = Map::new();
    out.insert("status".into(), json!(step.status));
    out.insert("attempts".into(), json!(step.attempt));
    put(
        &mut out,
        "started_at",
        step.started_at.clone().map(Value::String),
    );
    put(
        &mut out,
        "completed_at",
        step.completed_at.clone().map(Value::String),
    );
    put(&mut out, "duration_ms", step.duration_ms.map(Value::from));
    put(
        &mut out,
        "error",
        stored(step.error.as_deref(), limit, || uri("error")),
    );
    if view.outputs {
        put(
            &mut out,
            "output",
            stored(step.output.as_deref(), limit, || uri("output")),
        );
    }
    Value::Object(out)
}

/// A pending decision, in the shape of opcode's agent skill.
fn decision(run: &str, d: &DecisionRow, limit: Option<usize>) -> Value {
    let data = stored(Some(&d.context), limit, || {
        run_uri(run, &format!("decisions/{}/data", segment(&d.id)))
    });
    let mut out = Map::new();
    out.insert("id".into(), json!(d.id));
    out.insert("step_id".into(), json!(d.step_id));
    out.insert("status".into(), json!(d.status));
    out.insert(
        "context".into(),
        json!({ "prompt": d.prompt, "data": data.unwrap_or_else(|| json!({})) }),
    );
    put(
        &mut out,
        "options",
        stored(Some(&d.options), None, String::new),
    );
    put(
        &mut out,
        "timeout_at",
        d.timeout_at.clone().map(Value::String),
    );
    put(&mut out, "fallback", d.fallback.clone().map(Value::String));
    put(
        &mut out,
        "target_agent",
        d.target_agent.clone().map(Value::String),
    );
    Value::Object(out)
}

/// Sets `key` when there is something to say (never `null`).
fn put(out: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value.filter(|v| !v.is_null()) {
        out.insert(key.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{WorkflowRow, WorkflowStatus};
    use opcode_vm::StepStatus;

    fn step(name: &str, status: StepStatus, output: &str) -> StepRow {
        StepRow {
            step_id: name.into(),
            status,
            attempt: 1,
            output: Some(output.into()),
            ..StepRow::default()
        }
    }

    fn state(steps: Vec<StepRow>) -> WorkflowState {
        WorkflowState {
            workflow: WorkflowRow {
                id: "run-1".into(),
                name: "ten".into(),
                status: WorkflowStatus::Completed,
                inputs: "{}".into(),
                output: Some(r#"{"last":1}"#.into()),
                ..WorkflowRow::default()
            },
            steps,
            pending_decisions: Vec::new(),
        }
    }

    #[test]
    fn the_default_view_has_no_steps_and_no_nulls() {
        let s = state(vec![step("a", StepStatus::Completed, "{}")]);
        let got = of_state(&s, &View::default());
        assert_eq!(
            got,
            json!({"workflow_id": "run-1", "name": "ten", "status": "completed",
                   "step_counts": {"completed": 1}, "output": {"last": 1}})
        );
    }

    #[test]
    fn steps_come_in_dag_order_and_loop_instances_by_index() {
        let names = ["s10", "s2", "s1", "x[10]", "x[2]", "zz"];
        let rows: Vec<StepRow> = names
            .iter()
            .map(|n| step(n, StepStatus::Completed, "1"))
            .collect();
        let order: Vec<String> = ["s1", "s2", "x", "s10"].map(String::from).into();
        let got: Vec<&str> = ordered(&rows, &order)
            .iter()
            .map(|r| r.step_id.as_str())
            .collect();
        assert_eq!(got, ["s1", "s2", "x[2]", "x[10]", "s10", "zz"]);
    }

    #[test]
    fn a_big_output_becomes_a_reference_to_its_resource() {
        let big = format!("\"{}\"", "x".repeat(5000));
        let s = state(vec![step("read[1]", StepStatus::Completed, &big)]);
        let view = View {
            outputs: true,
            inline_limit: Some(4096),
            ..View::default()
        };
        let got = of_state(&s, &view);
        assert_eq!(
            got["steps"]["read[1]"]["output"],
            json!({"bytes": 5002, "uri": "opcode://runs/run-1/steps/read%5B1%5D/output"})
        );
    }

    #[test]
    fn a_step_filter_keeps_the_steps_loop_instances() {
        let s = state(vec![
            step("a", StepStatus::Completed, "1"),
            step("b[0]", StepStatus::Completed, "2"),
            step("b[1]", StepStatus::Failed, "3"),
        ]);
        let view = View {
            only: vec!["b".into()],
            ..View::default()
        };
        let got = of_state(&s, &view);
        let names: Vec<&String> = got["steps"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["b[0]", "b[1]"]);
        assert_eq!(got["step_counts"], json!({"completed": 2, "failed": 1}));
    }
}
