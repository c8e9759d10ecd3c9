//! `opcode export RUN_ID`: a finished run as a workflow test file
//! (spec/testing.md, "Golden runs"), for `opcodec test` to replay against
//! the workflow as it is now.

use std::path::PathBuf;

use serde_json::json;

use super::common::{DbArgs, Exit, fail};

/// Arguments of `export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The run.
    id: String,
    #[command(flatten)]
    db: DbArgs,
    /// The workflow file the test is about, as the test file names it
    /// (relative to where the test file goes).
    #[arg(long)]
    workflow: Option<PathBuf>,
    /// Write the test file here (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Runs `export`.
pub async fn export(args: ExportArgs) -> Exit {
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let state = match store.state(&args.id).await {
        Ok(Some(state)) => state,
        Ok(None) => return fail(format!("workflow `{}` not found", args.id)),
        Err(e) => return fail(e),
    };
    let status = state.workflow.status;
    if !(status.is_ended() || status == opcode_runtime::store::WorkflowStatus::Suspended) {
        return fail(format!(
            "workflow `{}` is {}: export a run that has ended or rests suspended",
            args.id,
            status.as_str()
        ));
    }
    let entries = match store.entries(&args.id, 0, false).await {
        Ok(entries) => entries,
        Err(e) => return fail(e),
    };
    let name = format!("golden run {} ({})", args.id, state.workflow.name);
    let case = match opcode_runtime::golden::case(&state, &entries, &name) {
        Ok(case) => case,
        Err(e) => return fail(e),
    };
    let mut file = json!({"cases": [case]});
    if let Some(workflow) = &args.workflow {
        file["workflow"] = json!(workflow.display().to_string());
    }
    let text = format!(
        "{}\n",
        serde_json::to_string_pretty(&file).unwrap_or_default()
    );
    let Some(path) = &args.output else {
        print!("{text}");
        return Exit::Ok;
    };
    match std::fs::write(path, text) {
        Ok(()) => {
            eprintln!("wrote {}", path.display());
            Exit::Ok
        }
        Err(e) => fail(format!("cannot write {}: {e}", path.display())),
    }
}
