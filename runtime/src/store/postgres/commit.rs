//! A commit on PostgreSQL: the writes of [`commit::plan`] in one
//! transaction, in two round trips — `BEGIN` and every check that may
//! refuse, then every change, the notice and `COMMIT` at once.

use deadpool_postgres::Object;
use futures::future::join_all;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{CHANNEL, backend};
use crate::store::commit::{self, Write};
use crate::store::{
    Commit, DecisionChange, LeaseChange, Notice, StoreError, StoreResult, TimerChange,
    WorkflowUpdate,
};

/// Makes `c`'s writes, all or nothing.
pub(super) async fn write(client: &mut Object, c: &Commit) -> StoreResult<()> {
    let id = c.workflow_id.as_str();
    let writes = commit::plan(c)?;
    let checks = writes.iter().take_while(|w| is_check(w)).count();
    // The checks are pipelined too: a refusal rolls back whatever the
    // checks after it did.
    let (begin, checked) = futures::join!(
        client.batch_execute("BEGIN"),
        join_all(writes[..checks].iter().map(|w| check(client, id, w)))
    );
    let refusal = checked
        .into_iter()
        .find_map(Result::err)
        .map_or(Ok(()), Err);
    if let Err(e) = begin.map_err(backend).and(refusal) {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(e);
    }
    let mut changes = Vec::new();
    for write in &writes[checks..] {
        changes.push(change(client, id, write));
    }
    let notice = Notice::Committed {
        workflow_id: id.to_owned(),
        owner: writer(c),
        status: c.update.as_ref().map(|u| u.status),
    }
    .encode();
    let params: [&(dyn ToSql + Sync); 2] = [&CHANNEL, &notice];
    let notify = execute(client, "SELECT pg_notify($1, $2)", &params);
    let (made, notified, committed) =
        futures::join!(join_all(changes), notify, client.batch_execute("COMMIT"));
    // A failed change aborts the transaction: its COMMIT rolls it back.
    for result in made {
        result?;
    }
    notified?;
    committed.map_err(backend)
}

/// Who wrote the commit, as its lease names it.
fn writer(c: &Commit) -> Option<String> {
    match (&c.fence, &c.lease) {
        (Some(fence), _) => Some(fence.owner.clone()),
        (None, Some(LeaseChange::Take { owner, .. } | LeaseChange::Release { owner })) => {
            Some(owner.clone())
        }
        (None, None) => None,
    }
}

/// The writes that may refuse: the plan puts them first.
fn is_check(write: &Write<'_>) -> bool {
    matches!(
        write,
        Write::Fence(_)
            | Write::RequireLatest { .. }
            | Write::Create { .. }
            | Write::Advance { .. }
            | Write::Update(_)
    )
}

async fn check(client: &Object, id: &str, write: &Write<'_>) -> StoreResult<()> {
    match *write {
        Write::Fence(fence) => {
            // The row's lock keeps a takeover from landing before this commit.
            let row = query_opt(
                client,
                "SELECT lease_owner, lease_epoch FROM workflows WHERE id = $1 FOR UPDATE",
                &[&id],
            )
            .await?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))?;
            let owner: Option<String> = row.try_get(0).map_err(backend)?;
            let epoch: i64 = row.try_get(1).map_err(backend)?;
            if owner.as_deref() != Some(fence.owner.as_str()) || epoch as u64 != fence.epoch {
                return Err(StoreError::Fenced(id.to_owned()));
            }
        }
        Write::RequireLatest { template, version } => {
            let latest: Option<i64> = query_one(
                client,
                "SELECT MAX(version) FROM workflow_templates WHERE name = $1",
                &[&template],
            )
            .await?
            .try_get(0)
            .map_err(backend)?;
            if latest.is_some_and(|latest| latest > version) {
                return Err(StoreError::Outdated(template.to_owned()));
            }
        }
        Write::Create {
            new,
            update,
            last_seq,
            lease,
        } => {
            let source = &new.source;
            execute(
                client,
                "INSERT INTO sources (hash, definition, program) VALUES ($1, $2, $3) \
                     ON CONFLICT (hash) DO NOTHING",
                &[&source.hash, &source.definition, &source.program],
            )
            .await?;
            let u = Columns::of(update);
            let last_seq = last_seq as i64;
            let owner = lease.map(|(owner, _)| owner);
            let ttl = lease.map(|(_, ttl)| ttl.as_secs_f64());
            let created = execute(
                client,
                "INSERT INTO workflows (id, name, source_hash, input_params, agent_id, \
                     parent_workflow_id, template_name, template_version, base_dir, created_at, \
                     status, last_seq, updated_at, output, error, context, started_at, \
                     completed_at, lease_owner, lease_expires_at, lease_epoch) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE($11, 'pending'), \
                     $12, COALESCE($13, $10), $14, $15, $16, $17, $18, $19, \
                     now() + make_interval(secs => $20), \
                     CASE WHEN $19::text IS NULL THEN 0 ELSE 1 END) \
                     ON CONFLICT (id) DO NOTHING",
                &[
                    &new.id,
                    &new.name,
                    &source.hash,
                    &new.inputs,
                    &new.agent_id,
                    &new.parent_id,
                    &new.template_name,
                    &new.template_version,
                    &new.base_dir,
                    &new.created_at,
                    &u.status,
                    &last_seq,
                    &u.updated_at,
                    &u.output,
                    &u.error,
                    &u.context,
                    &u.started_at,
                    &u.completed_at,
                    &owner,
                    &ttl,
                ],
            )
            .await?;
            if created == 0 {
                return Err(StoreError::Exists(new.id.clone()));
            }
            if let Some(agent) = &new.agent_id {
                see_agent(client, agent, &new.created_at).await?;
            }
        }
        Write::Advance { from, to, update } => {
            let moved = set_state(client, id, Some((from, to)), update).await?;
            return if moved == 0 {
                Err(conflict(client, id, from).await)
            } else {
                Ok(())
            };
        }
        Write::Update(update) => {
            let updated = set_state(client, id, None, Some(update)).await?;
            return if updated == 0 {
                Err(StoreError::NotFound(id.to_owned()))
            } else {
                Ok(())
            };
        }
        _ => {}
    }
    Ok(())
}

/// Sets a workflow's derived state (`update`, when given) and, with
/// `seqs`, compares and sets its `last_seq` from `.0` to `.1`: the rows
/// changed (0: moved on, or no such workflow).
async fn set_state(
    client: &Object,
    id: &str,
    seqs: Option<(u64, u64)>,
    update: Option<&WorkflowUpdate>,
) -> StoreResult<u64> {
    let from = seqs.map(|(from, _)| from as i64);
    let to = seqs.map(|(_, to)| to as i64);
    let u = Columns::of(update);
    execute(
        client,
        "UPDATE workflows SET last_seq = COALESCE($3, last_seq), \
         status = COALESCE($4, status), output = CASE WHEN $4::text IS NULL \
         THEN output ELSE $5 END, error = CASE WHEN $4::text IS NULL THEN error \
         ELSE $6 END, context = COALESCE($7, context), \
         started_at = COALESCE(started_at, $8), \
         completed_at = COALESCE($9, completed_at), \
         updated_at = COALESCE($10, updated_at) \
         WHERE id = $1 AND ($2::bigint IS NULL OR last_seq = $2)",
        &[
            &id,
            &from,
            &to,
            &u.status,
            &u.output,
            &u.error,
            &u.context,
            &u.started_at,
            &u.completed_at,
            &u.updated_at,
        ],
    )
    .await
}

/// A workflow update's columns, all `NULL` without one.
struct Columns<'a> {
    status: Option<&'static str>,
    output: Option<&'a str>,
    error: Option<&'a str>,
    context: Option<&'a str>,
    started_at: Option<&'a str>,
    completed_at: Option<&'a str>,
    updated_at: Option<&'a str>,
}

impl<'a> Columns<'a> {
    fn of(update: Option<&'a WorkflowUpdate>) -> Columns<'a> {
        Columns {
            status: update.map(|u| u.status.as_str()),
            output: update.and_then(|u| u.output.as_deref()),
            error: update.and_then(|u| u.error.as_deref()),
            context: update.and_then(|u| u.context.as_deref()),
            started_at: update.and_then(|u| u.started_at.as_deref()),
            completed_at: update.and_then(|u| u.completed_at.as_deref()),
            updated_at: update.map(|u| u.updated_at.as_str()),
        }
    }
}

async fn conflict(client: &Object, id: &str, expected: u64) -> StoreError {
    let found = query_opt(
        client,
        "SELECT last_seq FROM workflows WHERE id = $1",
        &[&id],
    )
    .await;
    match found {
        Ok(Some(row)) => match row.try_get::<_, i64>(0) {
            Ok(actual) => StoreError::Conflict {
                id: id.to_owned(),
                expected,
                actual: actual as u64,
            },
            Err(e) => backend(e),
        },
        Ok(None) => StoreError::NotFound(id.to_owned()),
        Err(e) => e,
    }
}

pub(super) async fn see_agent(client: &Object, agent: &str, at: &str) -> StoreResult<()> {
    execute(
        client,
        "INSERT INTO agents (id, name, created_at, last_seen_at) VALUES ($1, $1, $2, $2) \
             ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at",
        &[&agent, &at],
    )
    .await
    .map(|_| ())
}

/// One change: the refusals are behind, so none of these refuses.
async fn change(client: &Object, id: &str, write: &Write<'_>) -> StoreResult<()> {
    let (sql, params): (&str, Vec<Box<dyn ToSql + Sync + Send + '_>>) = match *write {
        Write::PutBlobs(blobs) => (
            "INSERT INTO blobs (hash, value) SELECT * FROM UNNEST($1::text[], $2::text[]) \
             ON CONFLICT (hash) DO NOTHING",
            vec![
                Box::new(blobs.iter().map(|b| b.hash.as_str()).collect::<Vec<_>>()),
                Box::new(blobs.iter().map(|b| b.text.as_str()).collect::<Vec<_>>()),
            ],
        ),
        Write::Append { first_seq, entries } => (
            "INSERT INTO events (workflow_id, seq, at, kind, event_type, step_id, version, \
             payload) SELECT $1, * FROM UNNEST($2::bigint[], $3::text[], $4::text[], \
             $5::text[], $6::text[], $7::int[], $8::text[])",
            vec![
                Box::new(id),
                Box::new(
                    (0..entries.len())
                        .map(|i| (first_seq + i as u64) as i64)
                        .collect::<Vec<i64>>(),
                ),
                Box::new(entries.iter().map(|e| e.at.as_str()).collect::<Vec<_>>()),
                Box::new(entries.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>()),
                Box::new(entries.iter().map(|e| e.event_type).collect::<Vec<_>>()),
                Box::new(
                    entries
                        .iter()
                        .map(|e| e.step_id.as_deref())
                        .collect::<Vec<_>>(),
                ),
                Box::new(
                    entries
                        .iter()
                        .map(|e| i32::from(e.version))
                        .collect::<Vec<_>>(),
                ),
                Box::new(
                    entries
                        .iter()
                        .map(|e| e.payload.as_str())
                        .collect::<Vec<_>>(),
                ),
            ],
        ),
        Write::PutSteps(steps) => (
            STEPS_UPSERT,
            vec![
                Box::new(id),
                Box::new(steps.iter().map(|s| s.step_id.as_str()).collect::<Vec<_>>()),
                Box::new(steps.iter().map(|s| s.status.as_str()).collect::<Vec<_>>()),
                Box::new(
                    steps
                        .iter()
                        .map(|s| i64::from(s.attempt))
                        .collect::<Vec<_>>(),
                ),
                Box::new(
                    steps
                        .iter()
                        .map(|s| s.output.as_deref())
                        .collect::<Vec<_>>(),
                ),
                Box::new(steps.iter().map(|s| s.error.as_deref()).collect::<Vec<_>>()),
                Box::new(
                    steps
                        .iter()
                        .map(|s| s.started_at.as_deref())
                        .collect::<Vec<_>>(),
                ),
                Box::new(
                    steps
                        .iter()
                        .map(|s| s.completed_at.as_deref())
                        .collect::<Vec<_>>(),
                ),
            ],
        ),
        Write::Timer(TimerChange::Set(t)) => (
            "INSERT INTO timers (workflow_id, timer_id, due_at, purpose, step_id) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (workflow_id, timer_id) DO UPDATE SET \
             due_at = excluded.due_at, purpose = excluded.purpose, step_id = excluded.step_id",
            vec![
                Box::new(id),
                Box::new(t.timer_id as i64),
                Box::new(t.due_at.as_str()),
                Box::new(t.purpose.as_str()),
                Box::new(t.step_id.as_deref()),
            ],
        ),
        Write::Timer(TimerChange::Clear(timer)) => (
            "DELETE FROM timers WHERE workflow_id = $1 AND timer_id = $2",
            vec![Box::new(id), Box::new(*timer as i64)],
        ),
        Write::Decision(DecisionChange::Ask(d)) => (
            "INSERT INTO pending_decisions (workflow_id, id, step_id, prompt, context, options, \
             fallback, target_agent_id, timeout_at, status, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10) \
             ON CONFLICT (workflow_id, id) DO UPDATE SET step_id = excluded.step_id, \
             prompt = excluded.prompt, context = excluded.context, options = excluded.options, \
             fallback = excluded.fallback, target_agent_id = excluded.target_agent_id, \
             timeout_at = excluded.timeout_at, status = 'pending', resolution = NULL, \
             resolved_by = NULL, created_at = excluded.created_at, resolved_at = NULL",
            vec![
                Box::new(id),
                Box::new(d.id.as_str()),
                Box::new(d.step_id.as_str()),
                Box::new(d.prompt.as_str()),
                Box::new(d.context.as_str()),
                Box::new(d.options.as_str()),
                Box::new(d.fallback.as_deref()),
                Box::new(d.target_agent.as_deref()),
                Box::new(d.timeout_at.as_deref()),
                Box::new(d.created_at.as_str()),
            ],
        ),
        Write::Decision(DecisionChange::Settle {
            id: decision,
            status,
            resolution,
            resolved_by,
            at,
        }) => (
            "UPDATE pending_decisions SET status = $3, resolution = $4, resolved_by = $5, \
             resolved_at = $6 WHERE workflow_id = $1 AND id = $2 AND status = 'pending'",
            vec![
                Box::new(id),
                Box::new(decision.as_str()),
                Box::new(status.as_str()),
                Box::new(resolution.as_deref()),
                Box::new(resolved_by.as_deref()),
                Box::new(at.as_str()),
            ],
        ),
        Write::TakeInbox(message) => ("DELETE FROM inbox WHERE id = $1", vec![Box::new(message)]),
        Write::Lease(LeaseChange::Take { owner, ttl }) => (
            "UPDATE workflows SET lease_owner = $2, \
             lease_expires_at = now() + make_interval(secs => $3), lease_epoch = lease_epoch + \
             CASE WHEN lease_owner IS DISTINCT FROM $2 THEN 1 ELSE 0 END WHERE id = $1",
            vec![
                Box::new(id),
                Box::new(owner.as_str()),
                Box::new(ttl.as_secs_f64()),
            ],
        ),
        Write::Lease(LeaseChange::Release { owner }) => (
            "UPDATE workflows SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2",
            vec![Box::new(id), Box::new(owner.as_str())],
        ),
        // The checks were made before.
        _ => return Ok(()),
    };
    let params: Vec<&(dyn ToSql + Sync)> =
        params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
    execute(client, sql, &params).await.map(|_| ())
}

/// Runs `sql` through a statement prepared once per connection.
async fn execute(client: &Object, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<u64> {
    let statement = client.prepare_cached(sql).await.map_err(backend)?;
    client.execute(&statement, params).await.map_err(backend)
}

async fn query_opt(
    client: &Object,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> StoreResult<Option<Row>> {
    let statement = client.prepare_cached(sql).await.map_err(backend)?;
    client.query_opt(&statement, params).await.map_err(backend)
}

async fn query_one(client: &Object, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Row> {
    let statement = client.prepare_cached(sql).await.map_err(backend)?;
    client.query_one(&statement, params).await.map_err(backend)
}

/// Step rows meet the rows they replace: the first start stays, and the
/// duration runs from it (0 for a step that ends without a start).
const STEPS_UPSERT: &str = "INSERT INTO step_state AS s (workflow_id, step_id, status, attempt, \
    output, error, started_at, completed_at, duration_ms) \
    SELECT $1, n.step_id, n.status, n.attempt, n.output, n.error, n.started_at, n.completed_at, \
    CASE WHEN n.completed_at IS NULL THEN NULL ELSE round(extract(epoch FROM \
    (n.completed_at::timestamptz - COALESCE(n.started_at, n.completed_at)::timestamptz)) * 1000)::bigint END \
    FROM UNNEST($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[]) \
    AS n (step_id, status, attempt, output, error, started_at, completed_at) \
    ON CONFLICT (workflow_id, step_id) DO UPDATE SET status = excluded.status, \
    attempt = excluded.attempt, output = excluded.output, error = excluded.error, \
    started_at = COALESCE(s.started_at, excluded.started_at), \
    completed_at = excluded.completed_at, \
    duration_ms = CASE WHEN excluded.completed_at IS NULL THEN NULL ELSE \
    round(extract(epoch FROM (excluded.completed_at::timestamptz - \
    COALESCE(s.started_at, excluded.started_at, excluded.completed_at)::timestamptz)) * 1000)::bigint END";
