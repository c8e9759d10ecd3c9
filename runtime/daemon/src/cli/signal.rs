//! `opcode signal ID --decide STEP=CHOICE | --signal NAME=JSON` and
//! `opcode cancel ID`: deliver an event, then carry on with the workflow
//! here until it ends or waits again (unless another live process runs it:
//! then the event waits in its inbox).

use opcode_runtime::{Delivery, EventStore, ExecError, Executor};
use opcode_vm::event::{Event, Resolution};

use super::common::{DbArgs, Exit, Format, fail, json_arg, report};

/// Arguments of `signal`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["decide", "signal"]))]
pub struct SignalArgs {
    /// The workflow.
    id: String,
    #[command(flatten)]
    db: DbArgs,
    /// Resolve the pending decision of reasoning step STEP (or of instance `STEP[i]`) with CHOICE.
    #[arg(long, value_name = "STEP=CHOICE")]
    decide: Option<String>,
    /// Why (recorded with the decision).
    #[arg(long, requires = "decide")]
    reasoning: Option<String>,
    /// Structured data sent with the decision (JSON).
    #[arg(long, requires = "decide")]
    data: Option<String>,
    /// Who decides (default `cli`).
    #[arg(long, default_value = "cli")]
    agent: String,
    /// Send the named signal with a JSON payload.
    #[arg(long, value_name = "NAME=JSON")]
    signal: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Arguments of `cancel`.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// The workflow.
    id: String,
    #[command(flatten)]
    db: DbArgs,
    /// Why.
    #[arg(long, default_value = "cancelled from the command line")]
    reason: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Runs `signal`.
pub async fn signal(args: SignalArgs) -> Exit {
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let target;
    let event = if let Some(decide) = &args.decide {
        match decision(store.as_ref(), &args, decide).await {
            Ok((owner, event)) => {
                target = owner;
                event
            }
            Err(exit) => return exit,
        }
    } else {
        let text = args.signal.as_deref().unwrap_or_default();
        let Some((name, payload)) = text.split_once('=') else {
            return fail(format!("--signal takes NAME=JSON, got `{text}`"));
        };
        target = match opcode_runtime::summary::signal_target(store.as_ref(), &args.id, name).await
        {
            Ok(target) => target,
            Err(e) => return fail(e),
        };
        Event::Signal {
            name: name.to_owned(),
            payload: opcode_stdlib::inputs::parse_value(payload),
        }
    };
    let executor = match args.db.executor(&store).await {
        Ok(executor) => executor,
        Err(exit) => return exit,
    };
    deliver(
        &executor,
        store.as_ref(),
        &target,
        &args.id,
        event,
        args.format,
    )
    .await
}

/// The run that waits for the decision `STEP=CHOICE` names (the workflow
/// itself, or a child run below it), and its resolution.
async fn decision(
    store: &dyn EventStore,
    args: &SignalArgs,
    decide: &str,
) -> Result<(String, Event), Exit> {
    let Some((step, choice)) = decide.split_once('=') else {
        return Err(fail(format!("--decide takes STEP=CHOICE, got `{decide}`")));
    };
    let found = opcode_runtime::summary::find_pending(store, &args.id, step)
        .await
        .map_err(fail)?;
    let (owner, found) = found.map_err(fail)?;
    let event = Event::DecisionResolved {
        decision: found.id.clone(),
        resolution: Resolution {
            choice: choice.to_owned(),
            reasoning: args.reasoning.clone(),
            data: json_arg(args.data.as_deref(), "--data")?,
            resolved_by: Some(args.agent.clone()),
        },
    };
    Ok((owner, event))
}

/// Runs `cancel`.
pub async fn cancel(args: CancelArgs) -> Exit {
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let executor = match args.db.executor(&store).await {
        Ok(executor) => executor,
        Err(exit) => return exit,
    };
    let event = Event::Cancel {
        reason: args.reason.clone(),
    };
    deliver(
        &executor,
        store.as_ref(),
        &args.id,
        &args.id,
        event,
        args.format,
    )
    .await
}

/// Delivers `event` to run `target`, then waits for run `id` (the same, or
/// the parent the decision was answered through) to settle or be held.
async fn deliver(
    executor: &Executor,
    store: &dyn EventStore,
    target: &str,
    id: &str,
    event: Event,
    format: Format,
) -> Exit {
    let _background = executor.background();
    let children = executor.changes();
    match executor.deliver(target, event).await {
        Ok(Delivery::Applied) => {
            // A parent held by the child it was answered through was left
            // by the process that ran it: carry it on here.
            if target != id {
                match executor.resume(id).await {
                    Ok(()) => {}
                    // Another process runs it, or it has ended: as it is.
                    Err(ExecError::Held { .. } | ExecError::Ended { .. }) => {
                        return report(store, id, format).await;
                    }
                    Err(e) => return fail(e),
                }
            }
            if let Err(e) = executor.settled_or_held(id, None, children).await {
                return fail(e);
            }
            report(store, id, format).await
        }
        Ok(Delivery::Queued { owner }) => {
            eprintln!(
                "workflow `{id}` is run by another process ({owner}); the event waits in its inbox"
            );
            Exit::Ok
        }
        Err(e) => fail(e),
    }
}
