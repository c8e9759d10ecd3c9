//! `opcode export RUN_ID`: a finished run as a workflow test file
//! (spec/testing.md, "Golden runs"), for `opcodec test` to replay against
//! the workflow as it is now.

use std::path::PathBuf;

use super::common::{DbArgs, Exit, fail, unknown_run};

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
    let case = match opcode_runtime::golden::export(store.as_ref(), &args.id).await {
        Ok(case) => case,
        Err(opcode_runtime::golden::ExportError::NotFound(_)) => {
            return fail(unknown_run(store.as_ref(), &args.id).await);
        }
        Err(e) => return fail(e),
    };
    let workflow = args.workflow.as_ref().map(|w| w.display().to_string());
    let file = opcode_runtime::golden::test_file(&[case], workflow.as_deref());
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
