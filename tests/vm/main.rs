//! The VM driven event by event with a simulated clock: retries and
//! backoff, deadlines, cancellation, races, concurrency limits, decisions
//! and their timeouts, signals, rejected events, replay, and Program
//! versioning.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code may panic

mod budgets;
mod rates;
mod sim;

use opcode_vm::effect::{Effect, TimerPurpose};
use opcode_vm::error::ActionError;
use opcode_vm::event::Event;
use opcode_vm::program::{FORMAT_VERSION, LoadError, MAGIC};
use opcode_vm::{Program, RunStatus, StepStatus};
use serde_json::json;
use sim::{Sim, program};

fn failure() -> ActionError {
    ActionError::execution("connection refused")
}

#[test]
fn retries_follow_the_backoff_and_keep_unique_keys() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "a", "action": "http.get", "params": {"url": "http://x"},
            "retry": {"max": 3, "backoff": "exponential", "delay": "100ms", "max_delay": "300ms"}}]}"#,
        json!({}),
    );
    let mut delays = Vec::new();
    for attempt in 1..=3 {
        let d = sim.dispatch_of("a").unwrap();
        assert_eq!(d.attempt, attempt);
        sim.finish("a", Err(failure()));
        assert_eq!(sim.step("a").status, StepStatus::Retrying);
        let (&timer, &due) = sim.timers.iter().next().unwrap();
        let _ = timer;
        delays.push(due - sim.now);
        sim.advance(1000);
    }
    assert_eq!(delays, [100, 200, 300], "exponential, capped by max_delay");
    sim.finish("a", Ok(json!({"status_code": 200})));
    assert_eq!(sim.status(), RunStatus::Completed);
    assert_eq!(sim.step("a").attempt, 4);
}

#[test]
fn a_rerun_keeps_the_completed_outputs_and_runs_from_the_failed_step() {
    let meta = opcode_vm::event::RunMeta {
        run_id: "run-2".into(),
        rerun_of: Some("run-1".into()),
        carried: [("fetch".to_owned(), json!({"body": "kept"}))]
            .into_iter()
            .collect(),
        ..Default::default()
    };
    let mut sim = Sim::start_with(
        r#"{"steps": [
            {"id": "fetch", "action": "http.get", "params": {"url": "http://x"}},
            {"id": "store", "action": "fs.write", "depends_on": ["fetch"],
             "params": {"path": "out.txt", "content": "${{steps.fetch.output.body}}"}}]}"#,
        json!({}),
        meta,
    );
    assert_eq!(
        sim.in_flight_names(),
        ["store"],
        "the carried step does not run"
    );
    assert_eq!(sim.dispatch_of("store").unwrap().params["content"], "kept");
    assert_eq!(sim.step("fetch").status, StepStatus::Completed);
    assert_eq!(sim.step("fetch").attempt, 0, "no attempt was made");
    let carried = sim.effects.iter().find_map(|e| match e {
        Effect::Record(opcode_vm::effect::Record::StepCompleted { carried_from, .. }) => {
            carried_from.clone()
        }
        _ => None,
    });
    assert_eq!(
        carried.as_deref(),
        Some("run-1"),
        "the log says where the output came from"
    );
    sim.finish("store", Ok(json!({"written": true})));
    assert_eq!(sim.status(), RunStatus::Completed);
    let replayed = sim.replayed();
    assert_eq!(
        replayed.status(),
        RunStatus::Completed,
        "the carried outputs replay"
    );
}

#[test]
fn non_retryable_errors_are_not_retried() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "a", "action": "assert.equals", "params": {"expected": 1, "actual": 2}, "retry": {"max": 5, "backoff": "none"}}]}"#,
        json!({}),
    );
    sim.finish(
        "a",
        Err(ActionError::new(
            opcode_vm::codes::R0111,
            "ASSERTION_FAILED",
            "no",
            false,
        )),
    );
    assert_eq!(sim.status(), RunStatus::Failed);
    assert_eq!(sim.vm.error().unwrap().error.code, "R0111");
}

#[test]
fn a_step_timeout_cancels_the_action_and_retries() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "a", "action": "http.get", "params": {"url": "http://x"}, "timeout": "5s", "retry": {"max": 1, "backoff": "none"}}]}"#,
        json!({}),
    );
    let first = sim.dispatch_of("a").unwrap();
    sim.advance(5_000);
    assert!(
        sim.effects
            .iter()
            .any(|e| matches!(e, Effect::CancelDispatch { effect } if *effect == first.effect))
    );
    let second = sim.dispatch_of("a").unwrap();
    assert_eq!(second.attempt, 2);
    // A late answer to the cancelled attempt is refused.
    assert!(
        sim.vm
            .apply(
                sim.now,
                &Event::ActionFinished {
                    effect: first.effect,
                    result: Ok(json!({}))
                },
                &opcode_stdlib::cel::CelHost::new(&sim.vm.plan().program)
            )
            .is_err()
    );
    sim.advance(5_000);
    assert_eq!(sim.status(), RunStatus::Failed);
    assert_eq!(sim.vm.error().unwrap().error.code, "R0101");
}

#[test]
fn a_flow_step_retries_as_a_whole_after_a_failure_or_its_timeout() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "each", "type": "loop", "config": {"mode": "for_each", "over": "[1, 2]",
            "body": [{"id": "b", "action": "http.get", "params": {"url": "http://x"}}]},
            "timeout": "10s", "retry": {"max": 2, "backoff": "none"}}]}"#,
        json!({}),
    );
    let names = sim.in_flight_names();
    assert_eq!(names.len(), 1, "{names:?}");
    let first = names[0].clone();
    sim.finish(&first, Ok(json!({})));
    let second = sim.in_flight_names()[0].clone();
    sim.finish(&second, Err(failure()));
    // The whole loop runs again, from its first item.
    assert_eq!(sim.in_flight_names(), std::slice::from_ref(&first));
    assert_eq!(sim.step("each").attempt, 2);
    // This attempt hangs: the step's deadline cancels it and the loop retries.
    sim.advance(10_000);
    assert_eq!(sim.step("each").attempt, 3);
    sim.finish(&first, Ok(json!({})));
    sim.finish(&second, Ok(json!({})));
    assert_eq!(sim.status(), RunStatus::Completed);
}

#[test]
fn on_error_ignore_and_fallback() {
    let mut sim = Sim::start(
        r#"{"steps": [
            {"id": "a", "action": "http.get", "params": {"url": "http://x"}, "on_error": {"strategy": "ignore"}},
            {"id": "b", "action": "http.get", "params": {"url": "http://y"}, "on_error": {"strategy": "fallback_step", "fallback_step": "c"}},
            {"id": "c", "action": "expr.eval", "params": {"expression": "1"}},
            {"id": "d", "action": "workflow.log", "depends_on": ["a", "b"], "params": {"message": "${{steps.a.output}} ${{steps.b.output.result}}"}}
        ]}"#,
        json!({}),
    );
    sim.finish("a", Err(failure()));
    sim.finish("b", Err(failure()));
    assert_eq!(sim.step("a").status, StepStatus::Completed);
    assert_eq!(sim.step("b").status, StepStatus::Failed);
    sim.finish("c", Ok(json!({"result": 1})));
    let d = sim.dispatch_of("d").unwrap();
    assert_eq!(d.params["message"], "null 1");
    sim.finish("d", Ok(json!({"logged": true})));
    assert_eq!(sim.status(), RunStatus::Completed);
}

#[test]
fn dependency_driven_scheduling_does_not_wait_for_a_level() {
    let mut sim = Sim::start(
        r#"{"steps": [
            {"id": "slow", "action": "workflow.log"},
            {"id": "fast", "action": "workflow.log"},
            {"id": "after-fast", "action": "workflow.log", "depends_on": ["fast"]}
        ]}"#,
        json!({}),
    );
    sim.finish("fast", Ok(json!({})));
    assert!(
        sim.dispatch_of("after-fast").is_some(),
        "started while `slow` still runs"
    );
    assert!(sim.dispatch_of("slow").is_some());
}

#[test]
fn race_cancels_the_losers() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "p", "type": "parallel", "config": {"mode": "race", "branches": [
            [{"id": "x", "action": "http.get", "params": {"url": "http://x"}}],
            [{"id": "y", "action": "http.get", "params": {"url": "http://y"}}]
        ]}}]}"#,
        json!({}),
    );
    let x = sim.dispatch_of("x").unwrap();
    sim.finish("y", Ok(json!({"v": 2})));
    assert!(
        sim.effects
            .iter()
            .any(|e| matches!(e, Effect::CancelDispatch { effect } if *effect == x.effect))
    );
    assert_eq!(sim.step("x").status, StepStatus::Cancelled);
    assert_eq!(
        sim.step("p").output,
        json!({"mode": "race", "winner": 1, "output": {"v": 2}})
    );
    assert_eq!(sim.status(), RunStatus::Completed);
}

#[test]
fn max_concurrency_bounds_running_branches() {
    let branches: Vec<String> = (0..5)
        .map(|i| format!(r#"[{{"id": "b{i}", "action": "crypto.uuid"}}]"#))
        .collect();
    let src = format!(
        r#"{{"steps": [{{"id": "p", "type": "parallel", "config": {{"max_concurrency": 2, "branches": [{}]}}}}]}}"#,
        branches.join(",")
    );
    let mut sim = Sim::start(&src, json!({}));
    let mut peak = 0;
    while !sim.inflight.is_empty() {
        peak = peak.max(sim.inflight.len());
        let name = sim.in_flight_names()[0].clone();
        sim.finish(&name, Ok(json!({"uuid": name})));
    }
    assert_eq!(peak, 2);
    assert_eq!(
        sim.step("p").output["branches"].as_array().unwrap().len(),
        5
    );
    assert_eq!(sim.status(), RunStatus::Completed);
}

#[test]
fn decisions_are_validated_and_resume_the_run() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "r", "type": "reasoning", "config": {"prompt_context": "ok?", "options": [{"id": "yes"}, {"id": "no"}], "target_agent": "boss"}},
                      {"id": "after", "action": "workflow.log", "depends_on": ["r"], "params": {"message": "${{steps.r.output.choice}}"}}]}"#,
        json!({}),
    );
    assert_eq!(sim.status(), RunStatus::Suspended);
    assert_eq!(sim.decisions()[0].id, "r");
    let wrong_choice = sim.decide("r", "maybe", "boss").unwrap_err();
    assert!(
        wrong_choice.message.contains("not an option"),
        "{wrong_choice}"
    );
    let wrong_agent = sim.decide("r", "yes", "intern").unwrap_err();
    assert!(
        wrong_agent.message.contains("for agent `boss`"),
        "{wrong_agent}"
    );
    assert!(sim.decide("nope", "yes", "boss").is_err());
    sim.decide("r", "yes", "boss").unwrap();
    assert_eq!(sim.status(), RunStatus::Active);
    assert_eq!(sim.dispatch_of("after").unwrap().params["message"], "yes");
    sim.finish("after", Ok(json!({})));
    assert_eq!(sim.status(), RunStatus::Completed);
    assert!(
        sim.decide("r", "yes", "boss").is_err(),
        "nothing is accepted after the end"
    );
}

#[test]
fn a_decisions_question_and_option_descriptions_read_values() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "size", "action": "crypto.uuid"},
                      {"id": "r", "type": "reasoning", "depends_on": ["size"], "config": {
                        "prompt_context": "Ship build ${{inputs.build}} (${{steps.size.output}})?",
                        "options": [{"id": "yes", "description": "deploy ${{inputs.build}}"}, {"id": "no", "description": "plain text"}]}}]}"#,
        json!({"build": 42}),
    );
    sim.finish("size", Ok(json!({"n": 1})));
    let asked = &sim.decisions()[0];
    assert_eq!(asked.prompt.as_deref(), Some(r#"Ship build 42 ({"n":1})?"#));
    let descriptions: Vec<_> = asked
        .options
        .iter()
        .map(|o| o.description.clone())
        .collect();
    assert_eq!(
        descriptions,
        [Some("deploy 42".into()), Some("plain text".into())]
    );
    assert!(
        asked
            .options
            .iter()
            .all(|o| o.description_template.is_none())
    );
}

/// The record names of `effects`.
fn records(effects: &[Effect]) -> Vec<&'static str> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Record(r) => Some(r.event_type()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_run_that_suspends_again_at_once_says_it_resumed_and_suspended() {
    let ask = |id: &str, after: Option<&str>| {
        let depends = after.map_or(String::new(), |a| format!(r#", "depends_on": ["{a}"]"#));
        format!(
            r#"{{"id": "{id}", "type": "reasoning"{depends}, "config": {{"prompt_context": "ok?", "options": [{{"id": "yes"}}]}}}}"#
        )
    };
    let source = format!(
        r#"{{"steps": [{}, {}]}}"#,
        ask("first", None),
        ask("second", Some("first"))
    );
    let mut sim = Sim::start(&source, json!({}));
    assert_eq!(sim.status(), RunStatus::Suspended);
    let effects = sim.decide("first", "yes", "boss").unwrap();
    assert_eq!(sim.status(), RunStatus::Suspended);
    assert_eq!(
        records(&effects),
        [
            "workflow_resumed",
            "step_completed",
            "step_started",
            "step_suspended",
            "workflow_suspended"
        ]
    );
    let effects = sim.decide("second", "yes", "boss").unwrap();
    assert_eq!(records(&effects)[0], "workflow_resumed", "{effects:?}");
    assert_eq!(sim.status(), RunStatus::Completed);
}

#[test]
fn decision_timeouts_take_the_fallback_or_fail() {
    let with = r#"{"steps": [{"id": "r", "type": "reasoning", "config": {"prompt_context": "ok?", "options": [{"id": "yes"}, {"id": "no"}], "timeout": "1h", "fallback": "no"}}]}"#;
    let mut sim = Sim::start(with, json!({}));
    assert_eq!(sim.decisions()[0].timeout_at, Some(1000 + 3_600_000));
    sim.advance(3_600_000);
    assert_eq!(sim.step("r").output["choice"], "no");
    assert_eq!(sim.step("r").output["resolved_by"], "system");
    assert_eq!(sim.status(), RunStatus::Completed);

    let without = r#"{"steps": [{"id": "r", "type": "reasoning", "config": {"prompt_context": "ok?", "timeout": "1s"}}]}"#;
    let mut sim = Sim::start(without, json!({}));
    sim.advance(1000);
    assert_eq!(sim.status(), RunStatus::Failed);
    assert_eq!(sim.vm.error().unwrap().error.code, "R0104");
}

#[test]
fn signals_wait_durably_and_can_arrive_early() {
    let src = r#"{"steps": [{"id": "a", "action": "workflow.log"}, {"id": "w", "type": "wait", "depends_on": ["a"], "config": {"signal": "go"}}]}"#;
    let mut sim = Sim::start(src, json!({}));
    sim.apply(Event::Signal {
        name: "go".into(),
        payload: json!({"n": 1}),
    })
    .unwrap();
    sim.finish("a", Ok(json!({})));
    assert_eq!(
        sim.step("w").output,
        json!({"signal": "go", "payload": {"n": 1}})
    );
    assert_eq!(sim.status(), RunStatus::Completed);

    let mut sim = Sim::start(src, json!({}));
    sim.finish("a", Ok(json!({})));
    assert_eq!(sim.status(), RunStatus::Suspended);
    assert_eq!(sim.vm.awaited_signals(), ["go"]);
    sim.apply(Event::Signal {
        name: "other".into(),
        payload: json!(null),
    })
    .unwrap();
    assert_eq!(sim.status(), RunStatus::Suspended);
    sim.apply(Event::Signal {
        name: "go".into(),
        payload: json!(2),
    })
    .unwrap();
    assert_eq!(sim.status(), RunStatus::Completed);
}

#[test]
fn run_timeout_fail_runs_the_error_hook() {
    let mut sim = Sim::start(
        r#"{"timeout": "10s", "on_error": {"id": "hook", "action": "workflow.log", "params": {"message": "${{workflow.error.code}}"}},
            "steps": [{"id": "a", "action": "http.get", "params": {"url": "http://x"}}]}"#,
        json!({}),
    );
    let a = sim.dispatch_of("a").unwrap();
    sim.advance(10_000);
    assert!(
        sim.effects
            .iter()
            .any(|e| matches!(e, Effect::CancelDispatch { effect } if *effect == a.effect))
    );
    assert_eq!(sim.dispatch_of("hook").unwrap().params["message"], "R0105");
    sim.finish("hook", Ok(json!({})));
    assert_eq!(sim.status(), RunStatus::Failed);
    let error = sim.vm.error().unwrap();
    assert_eq!(error.error.code, "R0105");
    // The error names the step the time ran out in, as failed steps do.
    assert_eq!(error.step, "a");
    assert_eq!(
        error.error.message,
        "the workflow timed out while step `a` was running"
    );
}

#[test]
fn a_run_timeout_names_every_step_running_not_their_containers() {
    let mut sim = Sim::start(
        r#"{"timeout": "10s", "steps": [{"id": "p", "type": "parallel", "config": {"branches": [
            [{"id": "a", "action": "http.get", "params": {"url": "http://x"}}],
            [{"id": "b", "action": "http.get", "params": {"url": "http://y"}}]]}}]}"#,
        json!({}),
    );
    sim.advance(10_000);
    let error = sim.vm.error().unwrap();
    assert_eq!(error.step, "a");
    assert_eq!(
        error.error.message,
        "the workflow timed out while steps `a`, `b` were running"
    );
}

#[test]
fn run_timeout_suspend_then_resume_restarts_the_step() {
    let mut sim = Sim::start(
        r#"{"timeout": "10s", "on_timeout": "suspend", "steps": [{"id": "a", "action": "http.get", "params": {"url": "http://x"}}]}"#,
        json!({}),
    );
    sim.advance(10_000);
    assert_eq!(sim.status(), RunStatus::Suspended);
    assert!(sim.inflight.is_empty());
    sim.apply(Event::Resume).unwrap();
    assert_eq!(sim.status(), RunStatus::Active);
    assert_eq!(sim.dispatch_of("a").unwrap().attempt, 2);
    assert!(
        sim.timers.values().any(|due| *due == sim.now + 10_000),
        "a fresh deadline"
    );
    sim.finish("a", Ok(json!({})));
    assert_eq!(sim.status(), RunStatus::Completed);
    assert!(sim.apply(Event::Resume).is_err());
}

#[test]
fn a_deadline_suspending_the_run_cancels_steps_in_loops_in_order() {
    let branches: Vec<String> = (0..24)
        .map(|i| {
            format!(r#"[{{"id": "b{i}", "action": "http.get", "params": {{"url": "http://x"}}}}]"#)
        })
        .collect();
    let src = format!(
        r#"{{"timeout": "10s", "on_timeout": "suspend", "steps": [{{"id": "l", "type": "loop", "config": {{"over": "[1]", "body": [
            {{"id": "p", "type": "parallel", "config": {{"branches": [{}]}}}}]}}}}]}}"#,
        branches.join(",")
    );
    let mut sim = Sim::start(&src, json!({}));
    // Effects are numbered in the order they were asked for: branch order.
    let mut dispatched: Vec<u64> = sim.inflight.keys().copied().collect();
    dispatched.sort_unstable();
    assert_eq!(dispatched.len(), 24);
    sim.effects.clear();
    sim.advance(10_000);
    assert_eq!(sim.status(), RunStatus::Suspended);
    let cancelled: Vec<u64> = sim
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::CancelDispatch { effect } => Some(*effect),
            _ => None,
        })
        .collect();
    assert_eq!(
        cancelled, dispatched,
        "one cancel per branch, in the branches' order"
    );
}

#[test]
fn run_timeout_cancel_and_explicit_cancel() {
    let mut sim = Sim::start(
        r#"{"timeout": "1s", "on_timeout": "cancel", "steps": [{"id": "w", "type": "wait", "config": {"duration": "1m"}}]}"#,
        json!({}),
    );
    sim.advance(1000);
    assert_eq!(sim.status(), RunStatus::Cancelled);
    assert_eq!(sim.step("w").status, StepStatus::Cancelled);
    assert!(sim.timers.is_empty());

    let mut sim = Sim::start(
        r#"{"steps": [{"id": "r", "type": "reasoning", "config": {"prompt_context": "?"}}, {"id": "a", "action": "crypto.uuid"}]}"#,
        json!({}),
    );
    sim.apply(Event::Cancel {
        reason: "user".into(),
    })
    .unwrap();
    assert_eq!(sim.status(), RunStatus::Cancelled);
    assert!(sim.inflight.is_empty());
    assert!(sim.vm.pending().is_empty());
    assert!(sim.record_names().contains(&"workflow_cancelled"));
}

#[test]
fn cancelling_one_decision_skips_its_step() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "r", "type": "reasoning", "config": {"prompt_context": "?"}},
                      {"id": "after", "action": "workflow.log", "depends_on": ["r"], "params": {"message": "r: ${{steps.r.output}}"}}]}"#,
        json!({}),
    );
    sim.apply(Event::DecisionCancelled {
        decision: "r".into(),
    })
    .unwrap();
    assert_eq!(sim.step("r").status, StepStatus::Skipped);
    assert_eq!(
        sim.dispatch_of("after").unwrap().params["message"],
        "r: null"
    );
}

#[test]
fn replay_reissues_pending_work_with_the_same_keys() {
    let mut sim = Sim::start(
        r#"{"steps": [{"id": "a", "action": "crypto.uuid"}, {"id": "w", "type": "wait", "config": {"duration": "1h"}},
                      {"id": "r", "type": "reasoning", "depends_on": ["a"], "config": {"prompt_context": "?"}}]}"#,
        json!({}),
    );
    let replayed = sim.replayed();
    let pending = replayed.pending();
    let dispatch = pending.iter().find_map(|e| match e {
        Effect::Dispatch(d) => Some((**d).clone()),
        _ => None,
    });
    assert_eq!(
        dispatch,
        sim.dispatch_of("a"),
        "the same dispatch: effect id, attempt, params"
    );
    assert!(pending.iter().any(|e| matches!(e, Effect::StartTimer { purpose: TimerPurpose::Sleep, due, .. } if *due == 1000 + 3_600_000)));
    sim.finish("a", Ok(json!({"uuid": "u"})));
    let replayed = sim.replayed();
    assert_eq!(replayed.pending_decisions().count(), 1);
    assert_eq!(replayed.steps(), sim.vm.steps());
}

#[test]
fn guards_skip_and_bad_guards_fail() {
    let sim = Sim::start(
        r#"{"steps": [{"id": "a", "action": "crypto.uuid", "condition": "inputs.go"}, {"id": "b", "action": "crypto.uuid", "condition": "inputs.n"}]}"#,
        json!({"go": false, "n": 3}),
    );
    assert_eq!(sim.step("a").status, StepStatus::Skipped);
    assert_eq!(sim.status(), RunStatus::Failed);
    assert!(
        sim.vm
            .error()
            .unwrap()
            .error
            .message
            .contains("true or false")
    );
}

#[test]
fn missing_references_fail_with_r0102_but_declared_unset_inputs_are_null() {
    let sim = Sim::start(
        r#"{"steps": [{"id": "a", "action": "workflow.log", "params": {"message": "${{inputs.absent}}"}}]}"#,
        json!({}),
    );
    let a = sim.step("a");
    let error = a
        .error
        .as_ref()
        .expect("an undeclared input that is not given");
    assert_eq!(error.code, "R0102");
    assert!(error.message.contains("does not declare it"), "{error:?}");
    let mut sim = Sim::start(
        r#"{"input_schema": {"type": "object", "properties": {"absent": {"type": "string"}}},
            "definition": {"inputs": {"user": "x"}, "steps": [
              {"id": "a", "action": "workflow.log", "params": {"message": "${{inputs.absent}}"}},
              {"id": "b", "action": "workflow.log", "depends_on": ["a"], "params": {"message": "${{inputs.user.name}}"}}]}}"#,
        json!({"user": "not an object"}),
    );
    assert_eq!(
        sim.dispatch_of("a").unwrap().params["message"],
        serde_json::Value::Null,
        "a declared input not given reads as null"
    );
    sim.finish("a", Ok(json!({})));
    let b = sim.step("b");
    assert_eq!(
        b.error.as_ref().map(|e| e.code.as_str()),
        Some("R0102"),
        "{b:?} {:?}",
        sim.vm.steps()
    );
}

#[test]
fn programs_of_another_version_are_rejected() {
    let p = program(r#"{"steps": [{"id": "a", "action": "crypto.uuid"}]}"#);
    let bytes = p.to_bytes();
    assert_eq!(Program::from_bytes(&bytes).unwrap(), p);
    let mut old = bytes.clone();
    old[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    assert_eq!(
        Program::from_bytes(&old),
        Err(LoadError::Version {
            found: FORMAT_VERSION + 1
        })
    );
    assert_eq!(
        Program::from_bytes(b"not a program"),
        Err(LoadError::NotAProgram)
    );
    let mut truncated = bytes[..bytes.len() / 2].to_vec();
    truncated[..8].copy_from_slice(&MAGIC);
    assert!(matches!(
        Program::from_bytes(&truncated),
        Err(LoadError::Corrupt(_))
    ));
    let mut bad = p.clone();
    bad.code[0] = opcode_vm::Instr::Guard { expr: 99 };
    assert!(matches!(
        Program::from_bytes(&bad.to_bytes()),
        Err(LoadError::Invalid(_))
    ));
}

/// A question the in-flight action of step `a` asks.
fn question(sim: &Sim, key: &str, timeout_ms: u64) -> Event {
    let effect = sim.dispatch_of("a").expect("a is in flight").effect;
    let option = |id: &str| opcode_vm::program::DecisionOption {
        id: id.into(),
        description: None,
        description_template: None,
    };
    Event::ActionAsked(Box::new(opcode_vm::event::Ask {
        effect,
        key: key.into(),
        prompt: "rm -rf build?".into(),
        options: vec![option("allow"), option("deny")],
        data: json!({"detail": "rm -rf build"}),
        timeout_ms,
        default: "deny".into(),
    }))
}

fn answers(effects: &[Effect]) -> Vec<(String, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::AnswerAction { key, choice, .. } => Some((key.clone(), choice.clone())),
            _ => None,
        })
        .collect()
}

const ASKING: &str =
    r#"{"steps": [{"id": "a", "action": "http.get", "params": {"url": "http://x"}}]}"#;

#[test]
fn a_question_an_action_asks_is_a_decision_on_its_running_step() {
    let mut sim = Sim::start(ASKING, json!({}));
    let asked = sim.apply(question(&sim, "k1", 60_000)).unwrap();
    let decision = sim.decisions().pop().expect("a decision is pending");
    assert_eq!(decision.id, "a.ask.k1");
    assert_eq!(decision.fallback.as_deref(), Some("deny"));
    assert!(
        asked
            .iter()
            .any(|e| matches!(e, Effect::RequestDecision(r) if r.id == "a.ask.k1"))
    );
    assert_eq!(
        sim.step("a").status,
        StepStatus::Running,
        "the step runs on"
    );
    assert_eq!(sim.status(), RunStatus::Active);
    assert!(
        sim.apply(question(&sim, "k1", 60_000))
            .unwrap()
            .iter()
            .all(|e| !matches!(e, Effect::RequestDecision(_))),
        "the same question asked twice is one decision"
    );
    assert!(sim.decide("a.ask.k1", "maybe", "ops").is_err());
    let answered = sim.decide("a.ask.k1", "allow", "ops").unwrap();
    assert_eq!(answers(&answered), [("k1".into(), "allow".into())]);
    assert!(sim.decisions().is_empty());
    assert!(sim.timers.is_empty(), "the question's timeout is cancelled");
    sim.finish("a", Ok(json!({})));
    assert_eq!(sim.status(), RunStatus::Completed);
}

#[test]
fn an_unanswered_question_takes_its_default_at_its_timeout_or_when_cancelled() {
    let mut sim = Sim::start(ASKING, json!({}));
    sim.apply(question(&sim, "k1", 5_000)).unwrap();
    let mark = sim.effects.len();
    sim.advance(5_000);
    assert_eq!(
        answers(&sim.effects[mark..]),
        [("k1".into(), "deny".into())]
    );
    assert!(
        sim.effects[mark..]
            .iter()
            .any(|e| matches!(e, Effect::CancelDecision { id } if id == "a.ask.k1")),
        "the decision timed out"
    );
    assert_eq!(sim.step("a").status, StepStatus::Running);
    sim.apply(question(&sim, "k2", 5_000)).unwrap();
    let cancelled = sim
        .apply(Event::DecisionCancelled {
            decision: "a.ask.k2".into(),
        })
        .unwrap();
    assert_eq!(answers(&cancelled), [("k2".into(), "deny".into())]);
    assert_eq!(sim.step("a").status, StepStatus::Running, "not skipped");
}

#[test]
fn a_question_left_open_is_withdrawn_when_its_action_ends() {
    let mut sim = Sim::start(ASKING, json!({}));
    sim.apply(question(&sim, "k1", 60_000)).unwrap();
    let mark = sim.effects.len();
    sim.finish("a", Ok(json!({})));
    assert!(
        sim.effects[mark..]
            .iter()
            .any(|e| matches!(e, Effect::CancelDecision { id } if id == "a.ask.k1"))
    );
    assert!(sim.timers.is_empty());
    assert_eq!(sim.status(), RunStatus::Completed);
    let mut cancelled = Sim::start(ASKING, json!({}));
    cancelled.apply(question(&cancelled, "k1", 60_000)).unwrap();
    cancelled
        .apply(Event::Cancel {
            reason: "stop".into(),
        })
        .unwrap();
    assert!(cancelled.decisions().is_empty());
    assert_eq!(cancelled.status(), RunStatus::Cancelled);
}

#[test]
fn a_rerun_of_the_dispatch_gets_the_answers_already_given_from_the_log() {
    let mut sim = Sim::start(ASKING, json!({}));
    sim.apply(question(&sim, "k1", 60_000)).unwrap();
    sim.decide("a.ask.k1", "allow", "ops").unwrap();
    sim.apply(question(&sim, "k2", 60_000)).unwrap();
    // The process dies: the log is replayed and the action runs again.
    let mut replayed = sim.replayed();
    let pending = replayed.pending();
    assert!(
        pending
            .iter()
            .any(|e| matches!(e, Effect::RequestDecision(r) if r.id == "a.ask.k2")),
        "the open question is asked again"
    );
    let again = replayed
        .apply(
            sim.now,
            &question(&sim, "k1", 60_000),
            &opcode_stdlib::cel::CelHost::new(&replayed.plan().program),
        )
        .unwrap();
    assert_eq!(answers(&again), [("k1".into(), "allow".into())]);
    assert!(again.iter().any(|e| matches!(
        e,
        Effect::Record(opcode_vm::Record::DecisionReplayed { decision, .. }) if decision == "a.ask.k1"
    )));
    assert!(
        again
            .iter()
            .all(|e| !matches!(e, Effect::RequestDecision(_))),
        "no new decision"
    );
}

#[test]
fn questions_of_no_action_in_flight_or_malformed_are_refused() {
    let mut sim = Sim::start(ASKING, json!({}));
    let mut bad_key = question(&sim, "k1", 1000);
    if let Event::ActionAsked(ask) = &mut bad_key {
        ask.key = "../etc".into();
    }
    assert!(sim.apply(bad_key).is_err());
    let mut bad_default = question(&sim, "k1", 1000);
    if let Event::ActionAsked(ask) = &mut bad_default {
        ask.default = "maybe".into();
    }
    assert!(sim.apply(bad_default).is_err());
    let late = question(&sim, "k1", 1000);
    sim.finish("a", Ok(json!({})));
    assert!(sim.apply(late).is_err(), "the action has finished");
}

#[test]
fn each_action_step_names_its_action() {
    let p = program(
        r#"{"steps": [
            {"id": "a", "action": "crypto.uuid"},
            {"id": "l", "type": "loop", "depends_on": ["a"], "config": {"mode": "for_each",
             "over": "[steps.a.uuid]", "body": [
                {"id": "h", "action": "crypto.hash", "params": {"data": "${{loop.item}}"}}]}}]}"#,
    );
    assert_eq!(p.action_of("a"), Some("crypto.uuid"));
    assert_eq!(p.action_of("h"), Some("crypto.hash"));
    assert_eq!(p.action_of("l"), None);
    assert_eq!(p.action_of("nowhere"), None);
}
