//! The six MCP tools, called as a client would, on the in-memory store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use opcode_daemon::api::{Api, ToolError};
use opcode_runtime::Executor;
use opcode_runtime::executor::Config;
use opcode_runtime::store::EventStore;
use opcode_runtime::store::memory::MemoryStore;
use opcode_stdlib::exec::EnvSecrets;
use serde_json::{Value, json};

#[path = "api/agents.rs"]
mod agents;
#[path = "api/answers.rs"]
mod answers;
#[path = "api/idempotency.rs"]
mod idempotency;
#[path = "api/priority.rs"]
mod priority;
#[path = "api/test_cases.rs"]
mod test_cases;
#[path = "api/view.rs"]
mod view;

fn api() -> Api {
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let exec = Executor::new(store, Arc::new(EnvSecrets), Config::default());
    Api::new(exec)
}

async fn ok(api: &Api, tool: &str, args: Value) -> Value {
    match api.call(tool, args.clone()).await {
        Ok(v) => v,
        Err(e) => panic!("{tool} {args} failed: {}", e.to_json()),
    }
}

async fn err(api: &Api, tool: &str, args: Value) -> ToolError {
    match api.call(tool, args.clone()).await {
        Ok(v) => panic!("{tool} {args} should fail, got {v}"),
        Err(e) => e,
    }
}

/// The example of a code's page in `spec/errors/`.
fn page_example(code: &str) -> Value {
    let page = opcode_vm::codes::lookup(code).unwrap().doc;
    let start = page.find("```json\n").unwrap() + 8;
    let end = start + page[start..].find("```").unwrap();
    serde_json::from_str(&page[start..end]).unwrap()
}

fn review() -> Value {
    json!({
        "name": "review",
        "agent_id": "bot-1",
        "input_schema": {"type": "object", "properties": {"who": {"type": "string", "default": "world"}}},
        "definition": {"steps": [
            {"id": "greet", "action": "workflow.log", "params": {"message": "hi ${{inputs.who}}"}},
            {"id": "approve", "type": "reasoning", "depends_on": ["greet"], "config": {
                "prompt_context": "Ship it?",
                "options": [{"id": "yes", "description": "ship"}, {"id": "no", "description": "stop"}]}}
        ]}
    })
}

#[tokio::test]
async fn define_run_signal_and_status() {
    let api = api();
    let defined = ok(&api, "opcode.define", review()).await;
    assert_eq!(defined["version"], "v1");
    let run = ok(
        &api,
        "opcode.run",
        json!({"template_name": "review", "agent_id": "bot-1"}),
    )
    .await;
    assert_eq!(run["status"], "suspended", "{run}");
    assert_eq!(run["pending_decisions"][0]["id"], "approve", "{run}");
    let id = run["workflow_id"].as_str().unwrap().to_owned();
    let status = ok(
        &api,
        "opcode.status",
        json!({"workflow_id": id, "include": ["steps", "events"]}),
    )
    .await;
    assert_eq!(status["steps"]["greet"]["status"], "completed", "{status}");
    assert!(
        status["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event_type"] == "step_suspended")
    );
    let signal = json!({"workflow_id": id, "signal_type": "decision", "step_id": "approve",
        "payload": {"choice": "yes"}, "reasoning": "fine", "agent_id": "bot-1"});
    let answer = ok(&api, "opcode.signal", signal.clone()).await;
    assert_eq!(answer["status"], "completed", "{answer}");
    assert_eq!(answer["resumed"], true);
    assert_eq!(answer["output"]["approve"]["choice"], "yes", "{answer}");
    let again = err(&api, "opcode.signal", signal).await;
    assert_eq!(again.code.id, "R0114");
}

/// The refusal of `resume` for a new run of template `name`.
async fn resume_refused(api: &Api, name: &str) -> ToolError {
    let run = ok(api, "opcode.run", json!({"template_name": name})).await;
    err(
        api,
        "opcode.signal",
        json!({"workflow_id": run["workflow_id"], "signal_type": "resume"}),
    )
    .await
}

#[tokio::test]
async fn resume_says_what_a_run_waits_for_instead_of_doing_nothing() {
    let api = api();
    ok(&api, "opcode.define", review()).await;
    let refused = resume_refused(&api, "review").await;
    let shown = refused.to_json();
    assert_eq!(refused.code.id, "R0114", "{shown}");
    assert!(
        refused.message.contains("decision of step `approve`"),
        "{shown}"
    );
    let waiting = &shown["error"]["details"]["waiting_for"][0];
    assert_eq!(waiting["kind"], "decision", "{shown}");
    assert_eq!(waiting["prompt"], "Ship it?", "{shown}");

    let waits = json!({"name": "waits", "definition": {"steps": [
        {"id": "window", "type": "wait", "config": {"signal": "deploy-window"}}]}});
    ok(&api, "opcode.define", waits).await;
    let shown = resume_refused(&api, "waits").await.to_json();
    assert_eq!(
        shown["error"]["details"]["waiting_for"][0]["kind"], "signal",
        "{shown}"
    );

    // A run its deadline suspended is what resume is for (the step it
    // stopped runs again, under a fresh deadline).
    let late = json!({"name": "late", "definition": {"timeout": "200ms", "on_timeout": "suspend",
        "steps": [{"id": "nap", "type": "wait", "config": {"duration": "120ms"}},
            {"id": "more", "type": "wait", "depends_on": ["nap"], "config": {"duration": "120ms"}}]}});
    ok(&api, "opcode.define", late).await;
    let run = ok(&api, "opcode.run", json!({"template_name": "late"})).await;
    assert_eq!(run["status"], "suspended", "{run}");
    let resumed = ok(
        &api,
        "opcode.signal",
        json!({"workflow_id": run["workflow_id"], "signal_type": "resume"}),
    )
    .await;
    assert_eq!(resumed["resumed"], true, "{resumed}");
    let mut status = Value::Null;
    for _ in 0..50 {
        status = ok(
            &api,
            "opcode.status",
            json!({"workflow_id": run["workflow_id"]}),
        )
        .await;
        if status["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status["status"], "completed", "{resumed} then {status}");
}

#[tokio::test]
async fn define_rejects_a_broken_workflow_with_diagnostics_as_data() {
    let api = api();
    let e = err(&api, "opcode.define", page_example("R0123")).await;
    assert_eq!(e.code.id, "R0123");
    let diagnostics = &e.details.as_ref().unwrap()["diagnostics"];
    let first = diagnostics
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["severity"] == "error")
        .unwrap();
    assert_eq!(first["pointer"], "/definition/steps/0/action", "{first}");
    assert!(first["line"].as_u64().unwrap() > 1);
    assert!(first["fix"].is_object(), "a typo gets a fix: {first}");
    let listed = ok(&api, "opcode.query", json!({"resource": "templates"})).await;
    assert_eq!(listed["count"], 0, "nothing stored");
}

#[tokio::test]
async fn run_validates_params_and_honours_defaults() {
    let api = api();
    let mut strict = review();
    strict["name"] = json!("strict");
    strict["input_schema"] =
        json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});
    ok(&api, "opcode.define", strict).await;
    let e = err(
        &api,
        "opcode.run",
        json!({"template_name": "strict", "params": {"n": "x"}}),
    )
    .await;
    assert_eq!(e.code.id, "R0108", "{}", e.to_json());
    ok(&api, "opcode.define", review()).await;
    let run = ok(
        &api,
        "opcode.run",
        json!({"template_name": "review", "wait": false}),
    )
    .await;
    let id = run["workflow_id"].as_str().unwrap();
    let rows = ok(
        &api,
        "opcode.query",
        json!({"resource": "workflows", "filter": {"template_name": "review"}}),
    )
    .await;
    assert_eq!(rows["workflows"][0]["id"], id);
    assert_eq!(
        rows["workflows"][0]["input_params"]["who"], "world",
        "the default applied"
    );
    let suspended = ok(
        &api,
        "opcode.query",
        json!({"resource": "workflows", "filter": {"status": ["suspended", "active"]}}),
    )
    .await;
    assert!(suspended["workflows"].as_array().is_some(), "{suspended}");
    let typo = err(
        &api,
        "opcode.query",
        json!({"resource": "workflows", "filter": {"status": "runnning"}}),
    )
    .await;
    assert!(
        typo.message.contains("`runnning` is not a workflow status"),
        "{typo:?}"
    );
    assert!(typo.message.contains("suspended"), "{typo:?}");
    let all = ok(
        &api,
        "opcode.query",
        json!({"resource": "decisions", "filter": {"status": "all"}}),
    )
    .await;
    assert!(all["decisions"].as_array().is_some(), "{all}");
    let typo = err(
        &api,
        "opcode.query",
        json!({"resource": "decisions", "filter": {"status": "answered"}}),
    )
    .await;
    assert!(
        typo.message.contains("`answered` is not a decision status"),
        "{typo:?}"
    );
    assert!(typo.message.contains("timed_out"), "{typo:?}");
}

#[tokio::test]
async fn versions_are_numeric_and_queries_page() {
    let api = api();
    for n in 0..11 {
        let mut version = review();
        version["description"] = json!(format!("version {}", n + 1));
        ok(&api, "opcode.define", version).await;
    }
    let page = ok(
        &api,
        "opcode.query",
        json!({"resource": "templates", "limit": 2, "offset": 1}),
    )
    .await;
    let versions: Vec<&str> = page["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v10", "v9"]);
    let run = ok(
        &api,
        "opcode.run",
        json!({"template_name": "review", "version": "v10"}),
    )
    .await;
    let id = run["workflow_id"].as_str().unwrap();
    let events = ok(
        &api,
        "opcode.query",
        json!({"resource": "events", "filter": {"workflow_id": id, "event_type": "step_started"}}),
    )
    .await;
    assert_eq!(events["count"], 2, "{events}");
    let decisions = ok(&api, "opcode.query", json!({"resource": "decisions"})).await;
    assert_eq!(decisions["decisions"][0]["workflow_id"], id);
}

#[tokio::test]
async fn diagrams_of_templates_and_workflows() {
    let api = api();
    ok(&api, "opcode.define", review()).await;
    let d = ok(
        &api,
        "opcode.diagram",
        json!({"template_name": "review", "format": "mermaid"}),
    )
    .await;
    assert!(d["diagram"].as_str().unwrap().starts_with("flowchart TD"));
    let run = ok(&api, "opcode.run", json!({"template_name": "review"})).await;
    let d = ok(
        &api,
        "opcode.diagram",
        json!({"workflow_id": run["workflow_id"], "format": "ascii"}),
    )
    .await;
    let text = d["diagram"].as_str().unwrap();
    assert!(text.contains("greet (workflow.log) [completed]"), "{text}");
    assert!(text.contains("approve (reasoning) [suspended]"), "{text}");
}

/// `opcode.diagram` is bounded (spec/limits.md, "The daemon"): past its
/// steps a picture is refused with R0130 naming the bound, and a PNG past
/// its pixels before anything is allocated; text goes further.
#[tokio::test]
async fn diagrams_are_bounded_in_steps_and_pixels() {
    let api = api();
    let chain: Vec<Value> = (0..2_001)
        .map(|i| {
            let after = if i == 0 {
                json!([])
            } else {
                json!([format!("s{}", i - 1)])
            };
            json!({"id": format!("s{i}"), "action": "crypto.uuid", "depends_on": after})
        })
        .collect();
    ok(
        &api,
        "opcode.define",
        json!({"name": "chain", "definition": {"steps": chain}}),
    )
    .await;
    for format in ["svg", "png"] {
        let e = err(
            &api,
            "opcode.diagram",
            json!({"template_name": "chain", "format": format}),
        )
        .await;
        assert_eq!(e.code.id, "R0130", "{format}: {}", e.to_json());
        assert_eq!(
            e.to_json()["error"]["details"]["limit"],
            "diagram_steps",
            "{}",
            e.to_json()
        );
    }
    let text = ok(
        &api,
        "opcode.diagram",
        json!({"template_name": "chain", "format": "mermaid"}),
    )
    .await;
    assert!(text["diagram"].as_str().unwrap().contains("s2000"));
    let branches: Vec<Value> = (0..1_000)
        .map(|i| json!([{"id": format!("b{i}"), "action": "crypto.uuid"}]))
        .collect();
    let wide =
        json!({"steps": [{"id": "p", "type": "parallel", "config": {"branches": branches}}]});
    ok(
        &api,
        "opcode.define",
        json!({"name": "wide", "definition": wide}),
    )
    .await;
    let e = err(
        &api,
        "opcode.diagram",
        json!({"template_name": "wide", "format": "png"}),
    )
    .await;
    assert_eq!(e.code.id, "R0130", "{}", e.to_json());
    assert!(e.message.contains("pixels"), "{}", e.message);
}

/// Template names that would alias another, or read as a path, are refused.
#[tokio::test]
async fn template_names_that_alias_or_read_as_paths_are_refused() {
    let api = api();
    let steps = json!({"steps": [{"id": "a", "action": "crypto.uuid"}]});
    for name in [
        "a\u{0}b",
        "../../x",
        "a/b",
        ".hidden",
        " ",
        "tab\tname",
        &"n".repeat(1 << 20),
    ] {
        let e = err(
            &api,
            "opcode.define",
            json!({"name": name, "definition": steps}),
        )
        .await;
        assert_eq!(
            e.code.id,
            "R0122",
            "{:?}: {}",
            &name[..name.len().min(20)],
            e.to_json()
        );
        assert!(e.message.len() < 300, "{}", e.message);
    }
    ok(
        &api,
        "opcode.define",
        json!({"name": "a", "definition": steps}),
    )
    .await;
    let templates = ok(&api, "opcode.query", json!({"resource": "templates"})).await;
    assert_eq!(
        templates["templates"].as_array().unwrap().len(),
        1,
        "{templates}"
    );
}

#[tokio::test]
async fn each_tool_error_has_its_code() {
    let api = api();
    let e = err(&api, "opcode.run", page_example("R0120")).await;
    assert_eq!(e.code.id, "R0120");
    let e = err(&api, "opcode.status", page_example("R0121")).await;
    assert_eq!(e.code.id, "R0121");
    ok(&api, "opcode.define", review()).await;
    let run = ok(&api, "opcode.run", json!({"template_name": "review"})).await;
    let mut bad = page_example("R0122");
    bad["workflow_id"] = run["workflow_id"].clone();
    let e = err(&api, "opcode.signal", bad).await;
    assert_eq!(e.code.id, "R0122", "{}", e.to_json());
    let e = err(&api, "opcode.query", json!({"resource": "planets"})).await;
    assert_eq!(e.code.id, "R0122");
    let e = err(&api, "opcode.nothing", json!({})).await;
    assert_eq!(e.code.id, "R0122");
}

#[tokio::test]
async fn signals_reach_wait_steps_and_cancel_works_on_decisions_and_runs() {
    let api = api();
    let waits = json!({"name": "waits", "definition": {"steps": [
        {"id": "window", "type": "wait", "config": {"signal": "deploy-window"}},
        {"id": "use", "action": "workflow.log", "depends_on": ["window"],
         "params": {"message": "region ${{steps.window.output.payload.region}}"}}]}});
    ok(&api, "opcode.define", waits).await;
    let run = ok(&api, "opcode.run", json!({"template_name": "waits"})).await;
    assert_eq!(run["status"], "suspended", "{run}");
    let id = run["workflow_id"].clone();
    let sent = ok(
        &api,
        "opcode.signal",
        json!({"workflow_id": id, "signal_type": "signal",
        "payload": {"name": "deploy-window", "data": {"region": "eu"}}}),
    )
    .await;
    assert_eq!(sent["status"], "completed", "{sent}");
    // A signal no wait step takes is refused, naming those it waits for.
    let run = ok(&api, "opcode.run", json!({"template_name": "waits"})).await;
    let wrong = err(
        &api,
        "opcode.signal",
        json!({"workflow_id": run["workflow_id"], "signal_type": "signal",
        "payload": {"name": "deploy-windo", "data": {}}}),
    )
    .await;
    assert_eq!(wrong.code.id, "R0114", "{}", wrong.to_json());
    assert!(
        wrong.message.contains("did you mean `deploy-window`?"),
        "{}",
        wrong.message
    );
    assert_eq!(
        wrong.details.as_ref().unwrap()["signals"],
        json!(["deploy-window", "window"])
    );
    let status = ok(
        &api,
        "opcode.status",
        json!({"workflow_id": id, "include": ["outputs"]}),
    )
    .await;
    assert_eq!(
        status["steps"]["window"]["output"]["payload"]["region"], "eu",
        "{status}"
    );

    ok(&api, "opcode.define", review()).await;
    // Cancelling one decision skips its step; the run carries on and ends.
    let run = ok(&api, "opcode.run", json!({"template_name": "review"})).await;
    let cancelled = ok(
        &api,
        "opcode.signal",
        json!({"workflow_id": run["workflow_id"],
        "signal_type": "cancel", "step_id": "approve"}),
    )
    .await;
    assert_eq!(cancelled["status"], "completed", "{cancelled}");
    let status = ok(
        &api,
        "opcode.status",
        json!({"workflow_id": run["workflow_id"], "steps": ["approve"]}),
    )
    .await;
    assert_eq!(status["steps"]["approve"]["status"], "skipped", "{status}");
    // Cancelling without a step ends the whole run.
    let run = ok(&api, "opcode.run", json!({"template_name": "review"})).await;
    let cancelled = ok(
        &api,
        "opcode.signal",
        json!({"workflow_id": run["workflow_id"],
        "signal_type": "cancel", "payload": {"reason": "not today"}}),
    )
    .await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    // Nothing left to resume.
    let e = err(
        &api,
        "opcode.signal",
        json!({"workflow_id": run["workflow_id"], "signal_type": "resume"}),
    )
    .await;
    assert_eq!(e.code.id, "R0114", "{}", e.to_json());
}

#[tokio::test]
async fn define_takes_opc_text_and_points_into_it() {
    let api = api();
    let opc = "name: \"hello\"\nstep greet workflow.log { params { message: \"hi\" } }\n";
    let defined = ok(
        &api,
        "opcode.define",
        json!({"name": "hello", "definition": opc}),
    )
    .await;
    assert_eq!(defined["version"], "v1");
    let run = ok(&api, "opcode.run", json!({"template_name": "hello"})).await;
    assert_eq!(run["status"], "completed", "{run}");

    let broken = "name: \"hello\"\n\nstep greet nope.nope { }\n";
    let error = err(
        &api,
        "opcode.define",
        json!({"name": "hello", "definition": broken}),
    )
    .await;
    assert_eq!(error.code.id, "R0123");
    let details = error.details.unwrap();
    let first = details["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["severity"] == "error")
        .unwrap();
    assert_eq!(
        (first["code"].as_str(), first["line"].as_u64()),
        (Some("E0040"), Some(3))
    );

    // A whole template in .opc (as the examples are): its schema applies.
    let template = std::fs::read_to_string("../../examples/approval-chain/workflow.opc").unwrap();
    ok(
        &api,
        "opcode.define",
        json!({"name": "chain", "definition": template}),
    )
    .await;
    let refused = err(
        &api,
        "opcode.run",
        json!({"template_name": "chain", "params": {}}),
    )
    .await;
    assert_eq!(
        refused.code.id, "R0108",
        "the input_schema's required params are checked"
    );

    let not_json = "{\"steps\": [";
    let error = err(
        &api,
        "opcode.define",
        json!({"name": "j", "definition": not_json}),
    )
    .await;
    let first = &error.details.unwrap()["diagnostics"][0];
    assert_eq!(
        (first["code"].as_str(), first["line"].as_u64()),
        (Some("E0001"), Some(1))
    );
}

#[tokio::test]
async fn run_answers_with_the_state_status_shows() {
    let api = api();
    ok(&api, "opcode.define", review()).await;
    let define = json!({"name": "sum", "definition": {"steps": [
        {"id": "a", "action": "expr.eval", "params": {"expression": "20 + 1"}},
        {"id": "b", "action": "expr.eval", "depends_on": ["a"],
         "params": {"expression": "steps.a.result * 2"}}
    ]}});
    ok(&api, "opcode.define", define).await;
    for (template, status) in [("sum", "completed"), ("review", "suspended")] {
        let run = ok(&api, "opcode.run", json!({"template_name": template})).await;
        assert_eq!(run["status"], status, "{run}");
        let id = run["workflow_id"].as_str().unwrap();
        let shown = ok(&api, "opcode.status", json!({"workflow_id": id})).await;
        for (key, value) in run.as_object().unwrap() {
            assert_eq!(&shown[key], value, "{template}: {key}");
        }
    }
}

#[tokio::test]
async fn run_takes_the_latest_version_another_process_defined() {
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let api_of = |store: &Arc<dyn EventStore>| {
        Api::new(Executor::new(
            store.clone(),
            Arc::new(EnvSecrets),
            Config::default(),
        ))
    };
    let (here, there) = (api_of(&store), api_of(&store));
    let answer = |n: i64| {
        json!({"name": "t", "definition": {"steps": [
            {"id": "a", "action": "expr.eval", "params": {"expression": format!("{n}")}}
        ]}})
    };
    ok(&here, "opcode.define", answer(1)).await;
    let run = ok(&here, "opcode.run", json!({"template_name": "t"})).await;
    assert_eq!(run["output"]["a"]["result"], 1, "{run}");
    // Defined by another process sharing the store: this one's memory is stale.
    ok(&there, "opcode.define", answer(2)).await;
    let run = ok(&here, "opcode.run", json!({"template_name": "t"})).await;
    assert_eq!(run["output"]["a"]["result"], 2, "{run}");
    let old = ok(
        &here,
        "opcode.run",
        json!({"template_name": "t", "version": "v1"}),
    )
    .await;
    assert_eq!(old["output"]["a"]["result"], 1, "{old}");
}

/// A run whose step waits on a child run that waits for a decision reads
/// as suspended with the child's decision (and its run's id), at once; the
/// decision answered through the parent completes both. Two levels deep.
#[tokio::test]
async fn a_decision_of_a_child_run_holds_its_parent_and_is_answered_through_it() {
    let api = api();
    ok(&api, "opcode.define", json!({"name": "kid", "definition": {"steps": [
        {"id": "ask", "type": "reasoning", "config": {"prompt_context": "ok?", "options": [{"id": "y"}, {"id": "n"}]}}],
        "output": {"said": "${{steps.ask.choice}}"}}})).await;
    ok(
        &api,
        "opcode.define",
        json!({"name": "mom", "definition": {"steps": [
        {"id": "c", "action": "workflow.run", "params": {"template_name": "kid"}}],
        "output": {"kid": "${{steps.c.output.output}}"}}}),
    )
    .await;
    ok(
        &api,
        "opcode.define",
        json!({"name": "gran", "definition": {"steps": [
        {"id": "m", "action": "workflow.run", "params": {"template_name": "mom"}}],
        "output": {"mom": "${{steps.m.output.output}}"}}}),
    )
    .await;
    let run = ok(&api, "opcode.run", json!({"template_name": "gran"})).await;
    assert_eq!(run["status"], "suspended", "{run}");
    let asked = &run["pending_decisions"][0];
    assert_eq!(asked["step_id"], "ask", "{run}");
    let child = asked["workflow_id"].as_str().unwrap();
    assert!(
        child.starts_with(run["workflow_id"].as_str().unwrap()),
        "{child}"
    );
    let wrong = err(
        &api,
        "opcode.signal",
        json!({"workflow_id": run["workflow_id"], "signal_type": "decision",
        "step_id": "nope", "payload": {"choice": "y"}}),
    )
    .await;
    assert_eq!(wrong.code.id, "R0114");
    let done = ok(
        &api,
        "opcode.signal",
        json!({"workflow_id": run["workflow_id"], "signal_type": "decision",
        "step_id": "ask", "payload": {"choice": "n"}}),
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output"], json!({"mom": {"kid": {"said": "n"}}}));
}

/// A named signal sent to a parent held by a child that waits for it goes
/// to that child; the parent then completes with the child's output. A
/// signal no run below waits for stays the parent's own.
#[tokio::test]
async fn a_signal_a_child_run_waits_for_is_delivered_through_its_parent() {
    let api = api();
    ok(
        &api,
        "opcode.define",
        json!({"name": "kid", "definition": {"steps": [
        {"id": "gate", "type": "wait", "config": {"signal": "go"}}],
        "output": {"got": "${{steps.gate.output.payload}}"}}}),
    )
    .await;
    ok(
        &api,
        "opcode.define",
        json!({"name": "mom", "definition": {"steps": [
        {"id": "c", "action": "workflow.run", "params": {"template_name": "kid"}}],
        "output": {"kid": "${{steps.c.output.output}}"}}}),
    )
    .await;
    let run = ok(&api, "opcode.run", json!({"template_name": "mom"})).await;
    assert_eq!(run["status"], "suspended", "{run}");
    let id = run["workflow_id"].clone();
    // No wait step of the parent (nor of a run below) takes `later`: it
    // would be kept and never read.
    let other = err(
        &api,
        "opcode.signal",
        json!({"workflow_id": id, "signal_type": "signal", "payload": {"name": "later", "data": 1}, "wait": false}),
    )
    .await;
    assert_eq!(other.code.id, "R0114", "{}", other.to_json());
    let done = ok(
        &api,
        "opcode.signal",
        json!({"workflow_id": id, "signal_type": "signal", "payload": {"name": "go", "data": {"n": 7}}}),
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output"], json!({"kid": {"got": {"n": 7}}}));
}
