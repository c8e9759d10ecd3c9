//! Running an example and checking what it produced; then replaying its
//! event log from every prefix.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use libtest_mimic::Failed;
use opcode_compiler::Compiler;
use opcode_stdlib::exec::{Actions, BoxFuture, Call, Child, Secrets, Services};
use opcode_stdlib::local::{LocalRun, Outcome, summary};
use opcode_vm::error::ActionError;
use opcode_vm::event::RunMeta;
use opcode_vm::{Plan, Vm};
use serde_json::{Value, json};

use crate::expect::{self, Run};
use crate::mock::Mock;

/// Replaces `{mock}`, `{dir}` and `{example}` in every string of `value`.
fn substitute(value: &Value, vars: &[(&str, &str)]) -> Value {
    match value {
        Value::String(s) => {
            let mut out = s.clone();
            for (name, with) in vars {
                out = out.replace(&format!("{{{name}}}"), with);
            }
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

struct NoSecrets;

impl Secrets for NoSecrets {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(std::future::ready(Some(format!("secret-{name}"))))
    }
}

/// Services for the tests: logs are dropped; child templates are the other examples.
struct TestServices {
    examples: PathBuf,
}

impl Services for TestServices {
    fn log(&self, _: &Call, _: &str, _: &str, _: &Value) {}
    fn emit(&self, _: &Call, _: &str, _: &Value) {}
    fn notify(&self, _: &Call, _: &str, _: &Value) -> Value {
        json!({"notified": false, "reason": "no_session"})
    }
    fn context_of<'a>(&'a self, _run_id: &'a str) -> BoxFuture<'a, Option<Value>> {
        Box::pin(std::future::ready(None))
    }
    fn run_child<'a>(
        &'a self,
        _: &'a Call,
        child: Child<'a>,
    ) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let (template, params) = (child.template, child.params.clone());
            let dir = self.examples.join(template);
            let outcome = run_workflow(&dir, params, &Run::default())
                .await
                .map_err(|e| ActionError::execution(format!("child {template}: {e}")))?;
            Ok(
                json!({"workflow_id": "child", "status": outcome.vm.status().as_str(), "output": outcome.vm.output()}),
            )
        })
    }
}

/// Compiles and runs the workflow of `dir` with `inputs`.
fn run_workflow<'a>(
    dir: &'a Path,
    inputs: Value,
    run: &'a Run,
) -> BoxFuture<'a, Result<Outcome, String>> {
    Box::pin(async move {
        let text = std::fs::read_to_string(dir.join("workflow.json")).map_err(|e| e.to_string())?;
        let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
        let (program, diagnostics) = compiler.compile(&text, "workflow.json");
        let program = program.ok_or_else(|| {
            format!(
                "does not compile: {:?}",
                diagnostics.iter().next().map(|d| &d.message)
            )
        })?;
        let inputs = opcode_stdlib::inputs::prepare(&program, &inputs)
            .map_err(|e| format!("inputs: {e:?}"))?;
        let services = Arc::new(TestServices {
            examples: dir.parent().map(Path::to_path_buf).unwrap_or_default(),
        });
        let local = LocalRun {
            plan: Plan::new(program),
            actions: Arc::new(Actions::new(services, dir.to_path_buf())),
            secrets: Arc::new(NoSecrets),
            decisions: run.decide.clone().into_iter().collect(),
            signals: run.signals.clone(),
            meta: RunMeta {
                run_id: "conformance".into(),
                agent_id: Some("tests".into()),
                ..RunMeta::default()
            },
            max_wait: Duration::from_secs(10),
        };
        Ok(local.run(inputs).await)
    })
}

/// Runs an example and checks its expectations; returns the outcome.
pub fn check_run(dir: &Path) -> Result<Option<Outcome>, Failed> {
    let expect = expect::load(dir)?;
    let Some(run) = expect.run else {
        return Ok(None);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let mock = Mock::start(run.mock.clone()).await;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp =
            std::env::temp_dir().join(format!("opcode-conformance-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
        for command in &run.setup {
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(command)
                .current_dir(&tmp)
                .env("EXAMPLE", dir)
                .status()
                .map_err(|e| e.to_string())?;
            if !status.success() {
                return Err(Failed::from(format!("setup `{command}` failed")));
            }
        }
        let tmp_text = tmp.display().to_string();
        let dir_text = dir.display().to_string();
        let vars = [
            ("mock", mock.base.as_str()),
            ("dir", tmp_text.as_str()),
            ("example", dir_text.as_str()),
        ];
        let inputs = substitute(&run.inputs, &vars);
        let outcome = run_workflow(dir, inputs, &run).await?;
        let got = summary(&outcome.vm);
        let mut problems: Vec<String> = outcome
            .rejected
            .iter()
            .map(|r| format!("refused: {r}"))
            .collect();
        if got["status"] != run.status {
            problems.push(format!(
                "status: expected {}, got {}",
                run.status, got["status"]
            ));
        }
        for (pointer, want) in &run.expect {
            let want = substitute(want, &vars);
            match got.pointer(pointer) {
                Some(value) if *value == want => {}
                other => problems.push(format!(
                    "{pointer}: expected {want}, got {}",
                    other.map_or("nothing".into(), ToString::to_string)
                )),
            }
        }
        for pointer in &run.expect_null {
            match got.pointer(pointer) {
                Some(Value::Null) => {}
                other => problems.push(format!(
                    "{pointer}: expected null, got {}",
                    other.map_or("nothing".into(), ToString::to_string)
                )),
            }
        }
        let seen = mock.seen();
        for (request, count) in &run.requests {
            let n = seen
                .iter()
                .filter(|s| format!("{} {}", s.method, s.path) == *request)
                .count();
            if n != *count {
                problems.push(format!("requests `{request}`: expected {count}, got {n}"));
            }
        }
        let _ = std::fs::remove_dir_all(&tmp);
        if problems.is_empty() {
            Ok(Some(outcome))
        } else {
            Err(Failed::from(format!(
                "{}\nsummary: {}",
                problems.join("\n"),
                serde_json::to_string_pretty(&got).unwrap_or_default()
            )))
        }
    })
}

/// Replays the log of `outcome` from every prefix: the VM rebuilt from the
/// first k events, fed the rest, must end exactly where the run ended; and
/// what it has pending after k events must be answered later in the log.
pub fn check_replay(outcome: &Outcome) -> Result<(), Failed> {
    let plan = outcome.vm.plan().clone();
    let host = opcode_stdlib::cel::CelHost::new(&plan.program);
    let reference = summary(&outcome.vm);
    for k in 0..=outcome.log.len() {
        let mut vm = Vm::new(plan.clone());
        for (at, event) in &outcome.log[..k] {
            vm.apply(*at, event, &host)
                .map_err(|e| format!("replay of event {k}: {e}"))?;
        }
        for effect in vm.pending() {
            if let opcode_vm::Effect::Dispatch(d) = effect {
                let answered = outcome.log[k..].iter().any(|(_, e)| matches!(e, opcode_vm::Event::ActionFinished { effect, .. } if *effect == d.effect));
                let still_pending =
                    outcome.vm.pending().iter().any(
                        |p| matches!(p, opcode_vm::Effect::Dispatch(q) if q.effect == d.effect),
                    );
                if !answered
                    && !still_pending
                    && outcome.vm.status() != opcode_vm::RunStatus::Cancelled
                {
                    let cancelled = !outcome.vm.status().is_terminal();
                    if cancelled {
                        return Err(Failed::from(format!(
                            "after {k} events, dispatch {} is pending but never answered",
                            d.effect
                        )));
                    }
                }
            }
        }
        for (at, event) in &outcome.log[k..] {
            vm.apply(*at, event, &host)
                .map_err(|e| format!("continuing after {k} events: {e}"))?;
        }
        let got = summary(&vm);
        if got != reference {
            return Err(Failed::from(format!(
                "replay from {k} events differs:\nexpected {reference}\ngot {got}"
            )));
        }
    }
    Ok(())
}
