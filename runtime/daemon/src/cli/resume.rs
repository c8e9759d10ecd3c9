//! `opcode resume [ID | --all]`: carry on with interrupted workflows.
//!
//! With an id, that workflow is loaded and continues (a run suspended by
//! its deadline gets a fresh one). With `--all`, every workflow a dead
//! process left running, every workflow with a due timer and every
//! workflow with mail waiting. The command returns when each of them has
//! ended or waits for a decision or a signal.

use std::collections::BTreeSet;

use opcode_runtime::{ExecError, Until};

use super::common::{DbArgs, Exit, Format, fail, report};
use opcode_runtime::time::{now_ms, parse_ms};

/// Arguments of `resume`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["id", "all"]))]
pub struct Args {
    /// The workflow.
    id: Option<String>,
    /// Every interrupted workflow, and those with due timers or mail.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    db: DbArgs,
    /// Output format (of a single workflow's report).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Runs `resume`.
pub async fn run(args: Args) -> Exit {
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let executor = match args.db.executor(&store).await {
        Ok(executor) => executor,
        Err(exit) => return exit,
    };
    let _background = executor.background();
    if let Some(id) = &args.id {
        if let Err(e) = executor.resume(id).await {
            return fail(e);
        }
        if let Err(e) = executor.wait(id, Until::Settled).await {
            return fail(e);
        }
        return report(store.as_ref(), id, args.format).await;
    }
    let mut ids: BTreeSet<String> = match executor.recover().await {
        Ok(ids) => ids.into_iter().collect(),
        Err(e) => return fail(e),
    };
    let now = now_ms();
    if let Ok(timers) = store.next_timers(10_000).await {
        ids.extend(
            timers
                .into_iter()
                .filter(|(_, due)| parse_ms(due).is_some_and(|due| due <= now))
                .map(|(id, _)| id),
        );
    }
    if let Ok(messages) = store.inbox(None).await {
        ids.extend(messages.into_iter().map(|m| m.workflow_id));
    }
    let mut exit = Exit::Ok;
    let mut resumed = Vec::new();
    for id in ids {
        match executor.resume(&id).await {
            Ok(()) => resumed.push(id),
            Err(ExecError::Held { owner, .. }) => {
                eprintln!("{id}: left alone, run by a live process ({owner})");
            }
            Err(ExecError::Ended { .. }) => {}
            Err(e) => {
                eprintln!("error: {e}");
                exit = Exit::Usage;
            }
        }
    }
    for id in &resumed {
        match executor.wait(id, Until::Settled).await {
            Ok(status) => {
                println!("{id} {status}");
                if matches!(status.as_str(), "failed" | "cancelled") && exit == Exit::Ok {
                    exit = Exit::Failed;
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                exit = Exit::Usage;
            }
        }
    }
    if resumed.is_empty() {
        eprintln!("nothing to resume");
    }
    exit
}
