//! The driver (`opcodec run`, the conformance suite) and stand-ins: runs
//! taken to rest with answers given in advance.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, executor, request, runtime};
use opcode_runtime::driver::{Answers, attend};
use opcode_runtime::executor::{Answer, StandIn};
use opcode_runtime::store::memory::MemoryStore;
use opcode_vm::effect::Dispatch;
use serde_json::{Value, json};

fn answers(decisions: &[(&str, &str)]) -> Answers {
    Answers {
        decisions: decisions
            .iter()
            .map(|(step, choice)| ((*step).to_owned(), (*choice).to_owned()))
            .collect(),
        max_wait: Duration::from_secs(5),
        decider: "tester".into(),
        reasoning: "given".into(),
        ..Answers::default()
    }
}

fn review() -> Value {
    json!({"steps": [
        {"id": "each", "type": "loop", "config": {
            "mode": "for_each", "over": "[1, 2, 3]", "body": [
                {"id": "review", "type": "reasoning", "config": {
                    "prompt_context": "ok?", "options": [{"id": "yes"}, {"id": "no"}]}}
            ]}}
    ]})
}

#[test]
fn every_ask_of_a_step_gets_its_answer_and_the_run_completes() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let _background = exec.background();
        let id = exec.start(request(&review(), &json!({}))).await.unwrap();
        let rest = attend(&exec, &id, &answers(&[("review", "yes")]))
            .await
            .unwrap();
        assert_eq!(rest.status.as_str(), "completed", "{rest:?}");
        assert!(rest.refused.is_empty());
        let steps = exec.store().steps(&id).await.unwrap();
        let answered = steps
            .iter()
            .filter(|s| s.step_id.starts_with("review["))
            .count();
        assert_eq!(answered, 3, "{steps:?}");
    });
}

#[test]
fn an_instance_answer_wins_over_its_steps_and_an_unused_one_is_reported() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let _background = exec.background();
        let id = exec.start(request(&review(), &json!({}))).await.unwrap();
        let given = answers(&[("review", "yes"), ("review[1]", "no"), ("reviw", "yes")]);
        let rest = attend(&exec, &id, &given).await.unwrap();
        assert_eq!(rest.status.as_str(), "completed", "{rest:?}");
        assert_eq!(
            rest.refused,
            ["no decision `reviw` was asked: the answer was not used"]
        );
        let steps = exec.store().steps(&id).await.unwrap();
        let choice = |name: &str| {
            let row = steps.iter().find(|s| s.step_id == name).unwrap();
            let output: Value = serde_json::from_str(row.output.as_deref().unwrap()).unwrap();
            output["choice"].as_str().unwrap().to_owned()
        };
        assert_eq!(
            [
                choice("review[0]"),
                choice("review[1]"),
                choice("review[2]")
            ],
            ["yes", "no", "yes"]
        );
    });
}

#[test]
fn unanswered_the_run_rests_suspended_and_a_bad_choice_is_reported() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let _background = exec.background();
        let id = exec.start(request(&review(), &json!({}))).await.unwrap();
        let rest = attend(&exec, &id, &answers(&[])).await.unwrap();
        assert_eq!(rest.status.as_str(), "suspended");
        // The driver answers every run of its store: a store of its own.
        let exec = executor(&Arc::new(MemoryStore::new()), config(dir.path()));
        let _background = exec.background();
        let id = exec.start(request(&review(), &json!({}))).await.unwrap();
        let rest = attend(&exec, &id, &answers(&[("review", "maybe")]))
            .await
            .unwrap();
        assert_eq!(rest.status.as_str(), "suspended");
        assert_eq!(rest.refused.len(), 1, "{rest:?}");
        assert!(rest.refused[0].contains("maybe"), "{rest:?}");
    });
}

#[test]
fn a_decision_timeout_within_max_wait_is_waited_for() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let workflow = json!({"steps": [
        {"id": "gate", "type": "reasoning", "config": {
            "prompt_context": "go?", "options": [{"id": "go"}, {"id": "stop"}],
            "timeout": "300ms", "fallback": "stop"}}
    ]});
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let _background = exec.background();
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        let rest = attend(&exec, &id, &answers(&[])).await.unwrap();
        assert_eq!(rest.status.as_str(), "completed", "{rest:?}");
    });
}

/// A parent calling `child` (as the template `kid`), attended without
/// answers: its id, how it rested, and its view.
fn parent_of(child: &Value) -> (String, opcode_runtime::driver::Rest, Value) {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kid.json"), child.to_string()).unwrap();
    let parent = json!({"steps": [
        {"id": "call", "action": "workflow.run", "params": {"template_name": "kid"}}
    ]});
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let _background = exec.background();
        let id = exec.start(request(&parent, &json!({}))).await.unwrap();
        let rest = attend(&exec, &id, &answers(&[])).await.unwrap();
        let view = opcode_runtime::summary::summary(
            store.as_ref(),
            &id,
            &opcode_runtime::summary::View::default(),
        )
        .await
        .unwrap()
        .unwrap();
        (id, rest, view)
    })
}

#[test]
fn a_child_that_waits_for_a_signal_holds_its_parent_and_is_named() {
    let waits = json!({"steps": [{"id": "w", "type": "wait", "config": {"signal": "go"}}]});
    let (id, rest, view) = parent_of(&waits);
    assert_eq!(rest.status.as_str(), "suspended", "{rest:?}");
    assert_eq!(view["status"], "suspended", "{view}");
    assert_eq!(
        view["waiting_runs"],
        json!([opcode_stdlib::exec::child_id(&format!("{id}/call/1"), None)]),
        "{view}"
    );
    assert!(view.get("pending_decisions").is_none(), "{view}");
}

#[test]
fn a_child_that_waits_for_a_decision_holds_its_parent_which_rests_suspended() {
    let (id, rest, view) = parent_of(&review());
    assert_eq!(rest.status.as_str(), "suspended", "{rest:?}");
    assert_eq!(view["status"], "suspended", "{view}");
    assert_eq!(
        view["waiting_runs"],
        json!([opcode_stdlib::exec::child_id(&format!("{id}/call/1"), None)]),
        "{view}"
    );
    assert_eq!(view["pending_decisions"][0]["step_id"], "review", "{view}");
    assert_eq!(
        view["pending_decisions"][0]["workflow_id"],
        opcode_stdlib::exec::child_id(&format!("{id}/call/1"), None)
    );
}

/// Answers `expr.eval` calls with 41 + attempt, holds `workflow.log`.
struct Canned;

impl StandIn for Canned {
    fn answer(&self, _run_id: &str, dispatch: &Dispatch) -> Answer {
        match dispatch.action.as_str() {
            "expr.eval" => Answer::Give(Ok(json!({"result": 41 + dispatch.attempt}))),
            "workflow.log" => Answer::Hold,
            _ => Answer::Call,
        }
    }
}

#[test]
fn a_stand_in_answers_calls_or_holds_them_and_the_actions_never_run() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let workflow = json!({"steps": [
        {"id": "add", "action": "expr.eval", "params": {"expression": "1 + 1"}},
        {"id": "held", "action": "workflow.log", "timeout": "200ms",
         "params": {"message": "never"}, "depends_on": ["add"]}
    ], "output": {"got": "${{steps.add.result}}"}});
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        exec.set_stand_in(Arc::new(Canned));
        let _background = exec.background();
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        let rest = attend(&exec, &id, &answers(&[])).await.unwrap();
        assert_eq!(rest.status.as_str(), "failed", "{rest:?}");
        let steps = exec.store().steps(&id).await.unwrap();
        let held = steps.iter().find(|s| s.step_id == "held").unwrap();
        let error: Value = serde_json::from_str(held.error.as_deref().unwrap()).unwrap();
        assert_eq!(error["kind"], "TIMEOUT_ERROR", "{error}");
        let add = steps.iter().find(|s| s.step_id == "add").unwrap();
        assert_eq!(add.output.as_deref(), Some(r#"{"result":42}"#));
    });
}

/// A finished run becomes a test case: each call in attempt order as a
/// mock with its recorded params and result, its decisions, and its
/// status, output and steps as expectations (spec/testing.md, "Golden runs").
#[test]
fn a_finished_run_is_a_golden_test_case() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let workflow = json!({"steps": [
        {"id": "hash", "action": "crypto.hash", "params": {"data": "${{inputs.word}}"}},
        {"id": "ask", "type": "reasoning", "depends_on": ["hash"],
         "config": {"prompt_context": "ok?", "options": [{"id": "y"}, {"id": "n"}]}},
        {"id": "each", "type": "loop", "depends_on": ["ask"], "config": {"over": "[1, 2]", "body": [
            {"id": "double", "action": "expr.eval", "params": {"expression": "iter.item * 2"}}]}}
    ]});
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let _background = exec.background();
        let id = exec
            .start(request(&workflow, &json!({"word": "hi"})))
            .await
            .unwrap();
        attend(&exec, &id, &answers(&[("ask", "y")])).await.unwrap();
        let state = exec.store().state(&id).await.unwrap().unwrap();
        let entries = exec.store().entries(&id, 0, false).await.unwrap();
        let case = opcode_runtime::golden::case(&state, &entries, "golden").unwrap();
        assert_eq!(case["inputs"], json!({"word": "hi"}));
        assert_eq!(
            case["mocks"]["hash"]["sequence"][0]["params"],
            json!({"data": "hi"})
        );
        assert!(
            case["mocks"]["hash"]["sequence"][0]["output"]["hash"].is_string(),
            "{case}"
        );
        assert_eq!(
            case["mocks"]["double[1]"]["sequence"][0]["output"],
            json!({"result": 4})
        );
        assert_eq!(case["decisions"], json!({"ask": "y"}));
        assert_eq!(case["expect"]["status"], "completed");
        assert_eq!(
            case["expect"]["steps"]["double[0]"],
            json!({"status": "completed", "attempts": 1})
        );
    });
}
