//! The run view: results sized for a context window (spec/mcp.md).

use super::*;

/// Ten steps in a chain, named so that the alphabet would misorder them,
/// the fifth's output the input `blob` (over the inline limit when big).
fn chain() -> Value {
    let steps: Vec<Value> = (1..=10)
        .map(|i| {
            let expression = if i == 5 {
                "inputs.blob".to_owned()
            } else {
                format!("{i}")
            };
            let mut step = json!({"id": format!("s{i}"), "action": "expr.eval",
                                  "params": {"expression": expression}});
            if i > 1 {
                step["depends_on"] = json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    json!({"name": "chain",
           "input_schema": {"type": "object", "properties": {"blob": {"type": "string", "default": "small"}}},
           "definition": {"steps": steps,
           "output": {"last": "${{steps.s10.output.result}}"}}})
}

fn nulls(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::Null => found.push(at.to_owned()),
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| nulls(v, &format!("{at}/{k}"), found)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| nulls(v, &format!("{at}/{i}"), found)),
        _ => {}
    }
}

#[tokio::test]
async fn the_default_answer_is_what_an_agent_acts_on() {
    let api = api();
    ok(&api, "opcode.define", chain()).await;
    let run = ok(&api, "opcode.run", json!({"template_name": "chain"})).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["output"], json!({"last": 10}));
    assert_eq!(run["step_counts"], json!({"completed": 10}));
    assert!(
        run.get("steps").is_none() && run.get("events").is_none(),
        "{run}"
    );
    let mut found = Vec::new();
    nulls(&run, "", &mut found);
    assert!(found.is_empty(), "null fields: {found:?}");
    let started = run["started_at"].as_str().unwrap();
    assert!(
        started.ends_with('Z') && started.len() == 24,
        "RFC 3339 UTC: {started}"
    );
    let id = run["workflow_id"].as_str().unwrap();
    let status = ok(&api, "opcode.status", json!({"workflow_id": id})).await;
    assert_eq!(status, run, "status answers as run does");
}

#[tokio::test]
async fn steps_come_in_dag_order_and_big_outputs_by_reference() {
    let api = api();
    ok(&api, "opcode.define", chain()).await;
    let run = ok(
        &api,
        "opcode.run",
        json!({"template_name": "chain", "include": ["outputs", "events"],
               "params": {"blob": "y".repeat(5000)}}),
    )
    .await;
    let names: Vec<&String> = run["steps"].as_object().unwrap().keys().collect();
    let expected: Vec<String> = (1..=10).map(|i| format!("s{i}")).collect();
    assert_eq!(names, expected.iter().collect::<Vec<_>>());
    assert_eq!(run["steps"]["s4"]["output"], json!({"result": 4}));
    let id = run["workflow_id"].as_str().unwrap();
    let big = &run["steps"]["s5"]["output"];
    assert_eq!(
        big["uri"],
        format!("opcode://runs/{id}/steps/s5/output"),
        "{big}"
    );
    assert!(big["bytes"].as_u64().unwrap() > 5000, "{big}");
    let events = run["events"].as_array().unwrap();
    assert!(events.iter().all(|e| e.get("workflow_id").is_none()));
    assert!(
        events
            .iter()
            .filter_map(|e| e.get("payload"))
            .all(|p| p.to_string().len() <= 4096 + 100),
        "every payload is small or a reference"
    );
}

#[tokio::test]
async fn a_step_filter_and_the_inputs_are_details_on_demand() {
    let api = api();
    ok(&api, "opcode.define", chain()).await;
    let run = ok(&api, "opcode.run", json!({"template_name": "chain"})).await;
    let id = run["workflow_id"].as_str().unwrap();
    let two = ok(
        &api,
        "opcode.status",
        json!({"workflow_id": id, "steps": ["s2"], "include": ["events", "inputs"]}),
    )
    .await;
    assert_eq!(two["steps"].as_object().unwrap().len(), 1, "{two}");
    assert!(
        two["steps"]["s2"].get("output").is_none(),
        "outputs not asked"
    );
    assert_eq!(two["inputs"], json!({"blob": "small"}));
    let events = two["events"].as_array().unwrap();
    assert!(
        !events.is_empty() && events.iter().all(|e| e["step_id"] == "s2"),
        "{two}"
    );
}

#[tokio::test]
async fn unknown_arguments_and_details_are_refused_with_the_valid_ones() {
    let api = api();
    ok(&api, "opcode.define", chain()).await;
    let e = err(
        &api,
        "opcode.run",
        json!({"template_name": "chain", "param": {"x": 1}}),
    )
    .await;
    assert_eq!(e.code.id, "R0122");
    assert!(
        e.message.contains("`param`") && e.message.contains("params"),
        "{}",
        e.message
    );
    let e = err(
        &api,
        "opcode.status",
        json!({"workflow_id": "w", "include": ["everything"]}),
    )
    .await;
    assert_eq!(e.code.id, "R0122");
    assert!(
        e.message.contains("steps, outputs, inputs, events"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn the_inline_limit_is_a_setting() {
    let api = api().with_inline_limit(8);
    ok(&api, "opcode.define", chain()).await;
    let run = ok(&api, "opcode.run", json!({"template_name": "chain"})).await;
    let id = run["workflow_id"].as_str().unwrap();
    assert_eq!(
        run["output"],
        json!({"bytes": 11, "uri": format!("opcode://runs/{id}/output")})
    );
}
