//! A commit on PostgreSQL as statements: the writes of [`commit::plan`],
//! each check written so that it raises its refusal (`opcode_refuse`,
//! schema 5) instead of answering it, so that nothing waits on an answer
//! and a commit's statements are all sent at once (`committer.rs`). A
//! raised refusal aborts the transaction; [`refusal`] reads it back.

use tokio_postgres::types::ToSql;

use crate::store::commit::{self, Write};
use crate::store::{
    Commit, DecisionChange, Fence, LeaseChange, Notice, StoreError, StoreResult, TimerChange,
    WorkflowUpdate, folded,
};

/// One parameter of a statement.
pub(super) type Param<'a> = Box<dyn ToSql + Sync + Send + 'a>;

/// One statement of a commit, with its parameters.
pub(super) struct Statement<'a> {
    /// The SQL, prepared once per connection.
    pub sql: &'static str,
    /// Its parameters, `$1` first.
    pub params: Vec<Param<'a>>,
}

impl<'a> Statement<'a> {
    fn new(sql: &'static str, params: Vec<Param<'a>>) -> Statement<'a> {
        Statement { sql, params }
    }

    /// The parameters as `tokio_postgres` takes them.
    pub fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|p| &**p as &(dyn ToSql + Sync))
            .collect()
    }
}

/// The SQLSTATE `opcode_refuse` raises.
pub(super) const REFUSED: &str = "OC409";

/// The statements of `c`, in order.
pub(super) fn statements(c: &Commit) -> StoreResult<Vec<Statement<'_>>> {
    let id = c.workflow_id.as_str();
    let writes = commit::plan(c)?;
    let mut out = Vec::with_capacity(writes.len() + 2);
    let mut fence = None;
    for write in &writes {
        match *write {
            // Checked with the compare and set that follows, when one does.
            Write::Fence(f) => fence = Some(f),
            Write::Advance { from, to, update } => {
                out.push(set_state(id, fence.take(), Some((from, to)), update));
            }
            Write::Update(update) => out.push(set_state(id, fence.take(), None, Some(update))),
            ref other => {
                if let Some(f) = fence.take() {
                    out.push(fenced(id, f));
                }
                statements_of(id, other, &mut out);
            }
        }
    }
    if let Some(f) = fence {
        out.push(fenced(id, f));
    }
    Ok(out)
}

/// The notice of `c`, announced once it is committed.
pub(super) fn notice(c: &Commit) -> String {
    Notice::Committed {
        workflow_id: c.workflow_id.clone(),
        owner: writer(c),
        status: c.update.as_ref().map(|u| u.status),
    }
    .encode()
}

/// Announces notices, each on the store's channel (`$1`): sent after `COMMIT`, in
/// a transaction of its own. A notice inside the transaction would hold
/// PostgreSQL's notify lock through the commit's WAL flush, so that every
/// announcing transaction of the cluster, every daemon's, committed one
/// after another (16-client commits of a step: 2,744/s with the notice in
/// the transaction, 3,669/s after it, 5,088/s without; pgbench,
/// decision 0047).
pub(super) const ANNOUNCE: &str = "SELECT pg_notify($1, n) FROM unnest($2::text[]) AS n";

/// The refusal a statement of `c` raised, if it raised one.
pub(super) fn refusal(e: &tokio_postgres::Error, c: &Commit) -> Option<StoreError> {
    let db = e.as_db_error()?;
    if db.code().code() != REFUSED {
        return None;
    }
    let subject = db.detail().unwrap_or(&c.workflow_id).to_owned();
    Some(match db.message() {
        "fenced" => StoreError::Fenced(subject),
        "not_found" => StoreError::NotFound(subject),
        "exists" => StoreError::Exists(subject),
        "outdated" => StoreError::Outdated(subject),
        _ => StoreError::Conflict {
            id: subject,
            expected: c.after_seq,
            actual: db.hint().and_then(|h| h.parse().ok()).unwrap_or_default(),
        },
    })
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

/// The fence alone: the row's lock keeps a takeover from landing before
/// the commit does.
fn fenced<'a>(id: &'a str, fence: &'a Fence) -> Statement<'a> {
    Statement::new(
        "SELECT opcode_refuse(CASE WHEN w.id IS NULL THEN 'not_found' ELSE 'fenced' END, $1, NULL) \
         FROM (SELECT 1) AS one LEFT JOIN (SELECT id, lease_owner, lease_epoch FROM workflows \
         WHERE id = $1 FOR UPDATE) AS w ON TRUE \
         WHERE w.id IS NULL OR w.lease_owner IS DISTINCT FROM $2::text OR w.lease_epoch <> $3",
        vec![
            Box::new(id),
            Box::new(fence.owner.as_str()),
            Box::new(fence.epoch as i64),
        ],
    )
}

/// Sets a workflow's derived state (`update`, when given), with `seqs`
/// compares and sets its `last_seq` from `.0` to `.1`, and with `fence`
/// requires its lease: one statement, which raises `not_found`, `fenced`
/// or `conflict` when it changed no row.
fn set_state<'a>(
    id: &'a str,
    fence: Option<&'a Fence>,
    seqs: Option<(u64, u64)>,
    update: Option<&'a WorkflowUpdate>,
) -> Statement<'a> {
    let u = Columns::of(update);
    Statement::new(
        "WITH moved AS (UPDATE workflows SET last_seq = COALESCE($3, last_seq), \
         status = COALESCE($4, status), output = CASE WHEN $4::text IS NULL \
         THEN output ELSE $5 END, error = CASE WHEN $4::text IS NULL THEN error \
         ELSE $6 END, context = COALESCE($7, context), \
         started_at = COALESCE(started_at, $8), \
         completed_at = COALESCE($9, completed_at), \
         updated_at = COALESCE($10, updated_at) \
         WHERE id = $1 AND ($2::bigint IS NULL OR last_seq = $2) \
         AND ($11::text IS NULL OR (lease_owner = $11 AND lease_epoch = $12)) RETURNING 1) \
         SELECT opcode_refuse(CASE WHEN w.id IS NULL THEN 'not_found' \
         WHEN $11::text IS NOT NULL AND (w.lease_owner IS DISTINCT FROM $11 \
         OR w.lease_epoch <> $12) THEN 'fenced' ELSE 'conflict' END, $1, w.last_seq) \
         FROM (SELECT 1) AS one LEFT JOIN workflows AS w ON w.id = $1 \
         WHERE NOT EXISTS (SELECT 1 FROM moved)",
        vec![
            Box::new(id),
            Box::new(seqs.map(|(from, _)| from as i64)),
            Box::new(seqs.map(|(_, to)| to as i64)),
            Box::new(u.status),
            Box::new(u.output),
            Box::new(u.error),
            Box::new(u.context),
            Box::new(u.started_at),
            Box::new(u.completed_at),
            Box::new(u.updated_at),
            Box::new(fence.map(|f| f.owner.as_str())),
            Box::new(fence.map(|f| f.epoch as i64)),
        ],
    )
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

/// Marks agent `$1` seen at `$2`, adding it if new; a known agent's time
/// moves only when it was last seen before `$3` (a second before `$2`,
/// [`seen_before`]). Every run an agent starts would otherwise update its
/// one row, and the row's lock, held to the end of the transaction's WAL
/// flush, made every daemon's transactions that start its runs commit one
/// after another (decision 0051).
pub(super) const SEE_AGENT: &str = "WITH added AS (INSERT INTO agents (id, name, created_at, \
    last_seen_at) VALUES ($1, $1, $2, $2) ON CONFLICT (id) DO NOTHING RETURNING 1) \
    UPDATE agents SET last_seen_at = $2 WHERE id = $1 AND last_seen_at < $3 \
    AND NOT EXISTS (SELECT 1 FROM added)";

/// A second before `at` (RFC 3339, whose text order is time order); `at`
/// itself when it cannot be read.
pub(super) fn seen_before(at: &str) -> String {
    crate::time::parse_ms(at).map_or_else(
        || at.to_owned(),
        |ms| crate::time::rfc3339(ms.saturating_sub(1000)),
    )
}

/// The statements of one write other than the fence and the compare and
/// set (`statements` writes those).
fn statements_of<'a>(id: &'a str, write: &Write<'a>, out: &mut Vec<Statement<'a>>) {
    match *write {
        Write::RequireLatest { template, version } => out.push(Statement::new(
            "SELECT opcode_refuse('outdated', $1, latest) FROM (SELECT MAX(version) AS latest \
             FROM workflow_templates WHERE name = $1) AS t WHERE latest > $2",
            vec![Box::new(template), Box::new(version)],
        )),
        Write::Create {
            new,
            update,
            last_seq,
            lease,
        } => {
            let source = &new.source;
            out.push(Statement::new(
                "INSERT INTO sources (hash, definition, program) VALUES ($1, $2, $3) \
                 ON CONFLICT (hash) DO NOTHING",
                vec![
                    Box::new(source.hash.as_str()),
                    Box::new(source.definition.as_str()),
                    Box::new(source.program.as_slice()),
                ],
            ));
            let u = Columns::of(update);
            out.push(Statement::new(
                "WITH made AS (INSERT INTO workflows (id, name, source_hash, input_params, \
                 agent_id, parent_workflow_id, template_name, template_version, base_dir, \
                 created_at, status, last_seq, updated_at, output, error, context, started_at, \
                 completed_at, lease_owner, lease_expires_at, lease_epoch) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE($11, 'pending'), \
                 $12, COALESCE($13, $10), $14, $15, $16, $17, $18, $19, \
                 now() + make_interval(secs => $20), \
                 CASE WHEN $19::text IS NULL THEN 0 ELSE 1 END) \
                 ON CONFLICT (id) DO NOTHING RETURNING 1) \
                 SELECT opcode_refuse('exists', $1, NULL) WHERE NOT EXISTS (SELECT 1 FROM made)",
                vec![
                    Box::new(new.id.as_str()),
                    Box::new(new.name.as_str()),
                    Box::new(source.hash.as_str()),
                    Box::new(new.inputs.as_str()),
                    Box::new(new.agent_id.as_deref()),
                    Box::new(new.parent_id.as_deref()),
                    Box::new(new.template_name.as_deref()),
                    Box::new(new.template_version),
                    Box::new(new.base_dir.as_deref()),
                    Box::new(new.created_at.as_str()),
                    Box::new(u.status),
                    Box::new(last_seq as i64),
                    Box::new(u.updated_at),
                    Box::new(u.output),
                    Box::new(u.error),
                    Box::new(u.context),
                    Box::new(u.started_at),
                    Box::new(u.completed_at),
                    Box::new(lease.map(|(owner, _)| owner)),
                    Box::new(lease.map(|(_, ttl)| ttl.as_secs_f64())),
                ],
            ));
            if let Some(agent) = &new.agent_id {
                out.push(Statement::new(
                    SEE_AGENT,
                    vec![
                        Box::new(agent.as_str()),
                        Box::new(new.created_at.as_str()),
                        Box::new(seen_before(&new.created_at)),
                    ],
                ));
            }
        }
        Write::PutBlobs(blobs) => out.push(Statement::new(
            "INSERT INTO blobs (hash, value) SELECT * FROM UNNEST($1::text[], $2::text[]) \
             ON CONFLICT (hash) DO NOTHING",
            vec![
                Box::new(blobs.iter().map(|b| b.hash.as_str()).collect::<Vec<_>>()),
                Box::new(blobs.iter().map(|b| b.text.as_str()).collect::<Vec<_>>()),
            ],
        )),
        Write::Append { first_seq, entries } => {
            let rows = folded::rows(first_seq, entries);
            out.push(Statement::new(
                "INSERT INTO events (workflow_id, seq, at, kind, event_type, step_id, version, \
                 payload) SELECT $1, * FROM UNNEST($2::bigint[], $3::text[], $4::text[], \
                 $5::text[], $6::text[], $7::int[], $8::text[])",
                vec![
                    Box::new(id),
                    Box::new(rows.iter().map(|r| r.seq as i64).collect::<Vec<_>>()),
                    Box::new(rows.iter().map(|r| r.at).collect::<Vec<_>>()),
                    Box::new(rows.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>()),
                    Box::new(rows.iter().map(|r| r.event_type).collect::<Vec<_>>()),
                    Box::new(rows.iter().map(|r| r.step_id).collect::<Vec<_>>()),
                    Box::new(
                        rows.iter()
                            .map(|r| i32::from(r.version))
                            .collect::<Vec<_>>(),
                    ),
                    Box::new(rows.into_iter().map(|r| r.payload).collect::<Vec<_>>()),
                ],
            ));
        }
        Write::PutSteps(steps) => out.push(Statement::new(
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
        )),
        Write::Timer(TimerChange::Set(t)) => out.push(Statement::new(
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
        )),
        Write::Timer(TimerChange::Clear(timer)) => out.push(Statement::new(
            "DELETE FROM timers WHERE workflow_id = $1 AND timer_id = $2",
            vec![Box::new(id), Box::new(*timer as i64)],
        )),
        Write::Decision(DecisionChange::Ask(d)) => out.push(Statement::new(
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
        )),
        Write::Decision(DecisionChange::Settle {
            id: decision,
            status,
            resolution,
            resolved_by,
            at,
        }) => out.push(Statement::new(
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
        )),
        Write::TakeInbox(message) => out.push(Statement::new(
            "DELETE FROM inbox WHERE id = $1",
            vec![Box::new(message)],
        )),
        Write::Lease(LeaseChange::Take { owner, ttl }) => out.push(Statement::new(
            "UPDATE workflows SET lease_owner = $2, \
             lease_expires_at = now() + make_interval(secs => $3), lease_epoch = lease_epoch + \
             CASE WHEN lease_owner IS DISTINCT FROM $2 THEN 1 ELSE 0 END WHERE id = $1",
            vec![
                Box::new(id),
                Box::new(owner.as_str()),
                Box::new(ttl.as_secs_f64()),
            ],
        )),
        Write::Lease(LeaseChange::Release { owner }) => out.push(Statement::new(
            "UPDATE workflows SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2",
            vec![Box::new(id), Box::new(owner.as_str())],
        )),
        // `statements` writes these.
        Write::Fence(_) | Write::Advance { .. } | Write::Update(_) => {}
    }
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
