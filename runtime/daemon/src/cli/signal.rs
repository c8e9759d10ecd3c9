//! `opcode signal ID --decide STEP=CHOICE | --signal NAME=JSON` and
//! `opcode cancel ID`: deliver an event, then carry on with the workflow
//! here until it ends or waits again (unless another live process runs it:
//! then the event waits in its inbox).

use opcode_runtime::{Delivery, EventStore, Executor, Until};
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
    let event = if let Some(decide) = &args.decide {
        match decision(store.as_ref(), &args, decide).await {
            Ok(event) => event,
            Err(exit) => return exit,
        }
    } else {
        let text = args.signal.as_deref().unwrap_or_default();
        let Some((name, payload)) = text.split_once('=') else {
            return fail(format!("--signal takes NAME=JSON, got `{text}`"));
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
    deliver(&executor, store.as_ref(), &args.id, event, args.format).await
}

/// The resolution of the pending decision `STEP=CHOICE` names.
async fn decision(store: &dyn EventStore, args: &SignalArgs, decide: &str) -> Result<Event, Exit> {
    let Some((step, choice)) = decide.split_once('=') else {
        return Err(fail(format!("--decide takes STEP=CHOICE, got `{decide}`")));
    };
    let pending = store
        .decisions(
            Some(&args.id),
            Some(opcode_runtime::store::DecisionStatus::Pending),
        )
        .await
        .map_err(fail)?;
    let found = pending
        .iter()
        .find(|d| d.id == step)
        .or_else(|| pending.iter().find(|d| d.step_id == step));
    let Some(found) = found else {
        let known: Vec<&str> = pending.iter().map(|d| d.id.as_str()).collect();
        return Err(fail(if known.is_empty() {
            format!("workflow `{}` has no pending decision", args.id)
        } else {
            format!(
                "no pending decision `{step}`; pending: {}",
                known.join(", ")
            )
        }));
    };
    Ok(Event::DecisionResolved {
        decision: found.id.clone(),
        resolution: Resolution {
            choice: choice.to_owned(),
            reasoning: args.reasoning.clone(),
            data: json_arg(args.data.as_deref(), "--data")?,
            resolved_by: Some(args.agent.clone()),
        },
    })
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
    deliver(&executor, store.as_ref(), &args.id, event, args.format).await
}

async fn deliver(
    executor: &Executor,
    store: &dyn EventStore,
    id: &str,
    event: Event,
    format: Format,
) -> Exit {
    let _background = executor.background();
    match executor.deliver(id, event).await {
        Ok(Delivery::Applied) => {
            if let Err(e) = executor.wait(id, Until::Settled).await {
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
