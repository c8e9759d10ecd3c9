//! `opcode schedule add|list|rm|enable|disable`: scheduled jobs, stored in
//! the database; a running daemon picks changes up within a second.

use opcode_runtime::schedule::{self, NewJob};
use opcode_runtime::store::ScheduleRow;
use opcode_runtime::time::{now_ms, rfc3339};

use super::common::{DbArgs, Exit, fail, json_arg};

/// Arguments of `schedule`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run a template on a cron schedule.
    Add(AddArgs),
    /// List the scheduled jobs.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a job.
    Rm {
        /// The job.
        id: String,
    },
    /// Let a job fire again (from its next time on).
    Enable {
        /// The job.
        id: String,
    },
    /// Stop a job from firing.
    Disable {
        /// The job.
        id: String,
    },
}

/// Arguments of `schedule add`.
#[derive(Debug, clap::Args)]
struct AddArgs {
    /// The template to run.
    #[arg(long)]
    template: String,
    /// `min hour day month weekday` (weekday 0 or 7 is Sunday), six fields
    /// with seconds first, or @hourly, @daily, @weekly, @monthly, @yearly.
    #[arg(long)]
    cron: String,
    /// The timezone the fields are read in (IANA name).
    #[arg(long, default_value = "UTC")]
    timezone: String,
    /// A fixed template version (default: the newest at each run).
    #[arg(long)]
    version: Option<i64>,
    /// Run params, a JSON object.
    #[arg(long, value_name = "JSON")]
    params: Option<String>,
    /// The agent runs are started as.
    #[arg(long)]
    agent: Option<String>,
    /// Fire times missed while no daemon ran: run once, or skip them.
    #[arg(long, default_value = "run-once", value_parser = ["run-once", "skip"])]
    missed: String,
    /// The job's id (default: a fresh one).
    #[arg(long)]
    id: Option<String>,
}

/// Runs `schedule`.
pub async fn schedule(args: Args) -> Exit {
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let result = match args.command {
        Command::Add(add) => match job_of(add) {
            Ok(job) => {
                let id = job.id.clone();
                store
                    .save_schedule(job)
                    .await
                    .map(|()| println!("scheduled {id}"))
            }
            Err(exit) => return exit,
        },
        Command::List { json } => store.schedules().await.map(|jobs| list(&jobs, json)),
        Command::Rm { id } => match store.delete_schedule(&id).await {
            Ok(true) => {
                println!("deleted {id}");
                Ok(())
            }
            Ok(false) => return fail(format!("no scheduled job `{id}`")),
            Err(e) => Err(e),
        },
        Command::Enable { id } => return set_enabled(store.as_ref(), &id, true).await,
        Command::Disable { id } => return set_enabled(store.as_ref(), &id, false).await,
    };
    match result {
        Ok(()) => Exit::Ok,
        Err(e) => fail(e),
    }
}

fn job_of(add: AddArgs) -> Result<ScheduleRow, Exit> {
    let params = json_arg(add.params.as_deref(), "--params")?;
    NewJob {
        template: add.template,
        version: add.version,
        cron: add.cron,
        timezone: Some(add.timezone),
        params,
        agent: add.agent,
        missed: Some(add.missed),
        id: add.id,
        origin: "cli",
    }
    .into_row(rfc3339(now_ms()))
    .map_err(fail)
}

async fn set_enabled(store: &dyn opcode_runtime::EventStore, id: &str, enabled: bool) -> Exit {
    match schedule::set_enabled(store, id, enabled).await {
        Ok(true) => {
            println!("{} {id}", if enabled { "enabled" } else { "disabled" });
            Exit::Ok
        }
        Ok(false) => fail(format!("no scheduled job `{id}`")),
        Err(e) => fail(e),
    }
}

fn list(jobs: &[ScheduleRow], json: bool) {
    if json {
        for job in jobs {
            println!("{}", opcode_daemon::api::schedule_json(job));
        }
        return;
    }
    if jobs.is_empty() {
        println!("no scheduled jobs");
        return;
    }
    for job in jobs {
        println!(
            "{}  {}  {} ({})  {}  next {}  last {} {}",
            job.id,
            if job.enabled { "on " } else { "off" },
            job.cron,
            job.timezone,
            job.template_name,
            job.next_run_at.as_deref().unwrap_or("-"),
            job.last_run_at.as_deref().unwrap_or("-"),
            job.last_run_status.as_deref().unwrap_or(""),
        );
    }
}
