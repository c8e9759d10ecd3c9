//! `opcode status ID` and `opcode events ID`: read-only views of the store.

use serde_json::{Value, json};

use super::common::{DbArgs, Exit, Format, fail, report};

/// Arguments of `status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The workflow.
    id: String,
    #[command(flatten)]
    db: DbArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Arguments of `events`.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    /// The workflow.
    id: String,
    #[command(flatten)]
    db: DbArgs,
    /// Only entries after this sequence number.
    #[arg(long, default_value_t = 0)]
    after: u64,
    /// Output format (`json`: one JSON object per line).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Runs `status`: the exit code follows the workflow's status.
pub async fn status(args: StatusArgs) -> Exit {
    match args.db.open().await {
        Ok(store) => report(store.as_ref(), &args.id, args.format).await,
        Err(exit) => exit,
    }
}

/// Runs `events`.
pub async fn events(args: EventsArgs) -> Exit {
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    match store.workflow(&args.id).await {
        Ok(Some(_)) => {}
        Ok(None) => return fail(format!("workflow `{}` not found", args.id)),
        Err(e) => return fail(e),
    }
    let entries = match store.entries(&args.id, args.after, false).await {
        Ok(entries) => entries,
        Err(e) => return fail(e),
    };
    for e in entries {
        let payload: Value = serde_json::from_str(&e.payload).unwrap_or(Value::Null);
        match args.format {
            Format::Json => println!(
                "{}",
                json!({
                    "seq": e.seq,
                    "at": e.at,
                    "kind": e.kind.as_str(),
                    "event_type": e.event_type,
                    "step_id": e.step_id,
                    "version": e.version,
                    "payload": payload,
                })
            ),
            Format::Human => {
                let mut text = payload.to_string();
                if text.len() > 100 {
                    let cut = (0..=100)
                        .rev()
                        .find(|&i| text.is_char_boundary(i))
                        .unwrap_or(0);
                    text.truncate(cut);
                    text.push('…');
                }
                println!(
                    "{:>5}  {}  {:<6}  {:<20}  {:<16}  {text}",
                    e.seq,
                    e.at,
                    e.kind.as_str(),
                    e.event_type,
                    e.step_id.as_deref().unwrap_or("-"),
                );
            }
        }
    }
    Exit::Ok
}
