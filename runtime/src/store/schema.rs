//! The SQL schema, as numbered migrations (documented in `spec/events.md`).
//!
//! A migration is applied once, in a transaction, and recorded in
//! `schema_version`. Never edit a released migration: add the next one.

/// `(version, name, SQL)`, in order.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "initial", V1),
    (2, "schedules", V2),
    (3, "vault", V3),
    (4, "leaner writes", V4),
    (5, "quarantined runs", V5),
    (6, "lease epochs", V6),
    (7, "large values once", V7),
    (8, "pruned runs", V8),
    (9, "runs by template", V9),
    (10, "concurrency slots", V10),
    (11, "rate windows", V11),
    (12, "pending starts", V12),
    (13, "folded entries", V13),
    (14, "sessions and transcripts", V14),
    (15, "agent registry", super::registry::TABLES),
    (16, "agent eval results", super::registry::EVAL_TABLE),
];

/// The newest schema version this build knows.
pub const LATEST: i64 = 16;

/// Agent sessions' turns (spec/agents.md, "Sessions"), in order by `n`,
/// calls' transcripts, deleted with their run, and worktrees' writer
/// leases.
const V14: &str = "
CREATE TABLE session_turns (
    session TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    step TEXT NOT NULL,
    n INTEGER NOT NULL,
    turn TEXT NOT NULL,
    PRIMARY KEY (session, workflow_id, step)
) WITHOUT ROWID;
CREATE INDEX session_turns_in_order ON session_turns (session, n);
CREATE TABLE transcripts (
    workflow_id TEXT NOT NULL,
    step TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (workflow_id, step, attempt)
) WITHOUT ROWID;
CREATE TABLE worktree_leases (
    worktree TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX worktree_leases_by_owner ON worktree_leases (owner);
";

/// Every log entry, a commit's several entries kept in one row unfolded
/// (`store/folded.rs`, decision 0050): what queries across runs filter
/// (`store/listing.rs` unfolds the same way).
const V13: &str = "
CREATE VIEW log_entries (workflow_id, seq, at, kind, event_type, step_id, version, payload) AS
SELECT workflow_id, seq, at, kind, event_type, step_id, version, payload FROM events
WHERE event_type <> 'entries'
UNION ALL
SELECT e.workflow_id, e.seq - json_array_length(e.payload) + 1 + j.key, e.at,
    j.value ->> 'kind', j.value ->> 'event_type', j.value ->> 'step_id',
    j.value ->> 'version', j.value -> 'payload'
FROM events AS e, json_each(e.payload) AS j WHERE e.event_type = 'entries';
";

/// The runs debounced triggers will start (spec/flow-control.md, "Debounce").
const V12: &str = "
CREATE TABLE pending_starts (
    template TEXT NOT NULL,
    key TEXT NOT NULL,
    inputs TEXT NOT NULL,
    first_ms INTEGER NOT NULL,
    due_ms INTEGER NOT NULL,
    deliveries INTEGER NOT NULL,
    PRIMARY KEY (template, key)
) WITHOUT ROWID;
CREATE INDEX pending_starts_by_due ON pending_starts (due_ms);
";

/// The calls counted in each window of each rate limit key
/// (spec/flow-control.md, "Rate limits").
const V11: &str = "
CREATE TABLE rate_windows (
    key TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    PRIMARY KEY (key, start_ms)
) WITHOUT ROWID;
";

/// The runs of concurrency keys, holding a slot or waiting for one
/// (spec/flow-control.md, "Admission").
const V10: &str = "
CREATE TABLE run_slots (
    key TEXT NOT NULL,
    workflow_id TEXT PRIMARY KEY,
    lim INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    held INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX run_slots_by_key ON run_slots (key, held, turn);
";

/// A template's runs, newest first (`opcode.query`, the panel,
/// retention); decisions of a status, oldest first (`opcode.query`).
const V9: &str = "
CREATE INDEX workflows_by_template ON workflows (template_name, created_at DESC)
    WHERE template_name IS NOT NULL;
CREATE INDEX decisions_by_status_time ON pending_decisions (status, created_at);
";

/// What is left of a run retention pruned (spec/store.md, "Retention").
const V8: &str = "
CREATE TABLE pruned_runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    template_name TEXT,
    template_version INTEGER,
    status TEXT NOT NULL,
    agent_id TEXT,
    parent_workflow_id TEXT,
    created_at TEXT NOT NULL,
    completed_at TEXT,
    pruned_at TEXT NOT NULL,
    export TEXT
);
CREATE INDEX pruned_runs_by_time ON pruned_runs (pruned_at DESC);
";

const V7: &str = "
CREATE TABLE blobs (
    hash TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
";

const V1: &str = "
CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    type TEXT NOT NULL DEFAULT 'llm' CHECK (type IN ('llm', 'system', 'human', 'service')),
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    last_seen_at TEXT
);

CREATE TABLE sources (
    hash TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    program BLOB NOT NULL
);

CREATE TABLE workflows (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    template_name TEXT,
    template_version INTEGER,
    source_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'active', 'suspended', 'completed', 'failed', 'cancelled')),
    agent_id TEXT,
    parent_workflow_id TEXT,
    input_params TEXT NOT NULL DEFAULT '{}',
    output TEXT,
    error TEXT,
    context TEXT,
    base_dir TEXT,
    last_seq INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    started_at TEXT,
    completed_at TEXT,
    updated_at TEXT NOT NULL
);
CREATE INDEX workflows_by_status ON workflows (status, updated_at DESC);
CREATE INDEX workflows_by_agent ON workflows (agent_id, created_at DESC);
CREATE INDEX workflows_by_parent ON workflows (parent_workflow_id);
CREATE INDEX workflows_by_created ON workflows (created_at DESC);

CREATE TABLE events (
    workflow_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('input', 'record', 'note')),
    event_type TEXT NOT NULL,
    step_id TEXT,
    version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (workflow_id, seq)
) WITHOUT ROWID;

CREATE TABLE step_state (
    workflow_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    status TEXT NOT NULL
        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'skipped', 'suspended', 'retrying', 'cancelled')),
    attempt INTEGER NOT NULL DEFAULT 0,
    output TEXT,
    error TEXT,
    started_at TEXT,
    completed_at TEXT,
    duration_ms INTEGER,
    PRIMARY KEY (workflow_id, step_id)
) WITHOUT ROWID;

CREATE TABLE pending_decisions (
    workflow_id TEXT NOT NULL,
    id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    prompt TEXT NOT NULL DEFAULT '',
    context TEXT NOT NULL DEFAULT '{}',
    options TEXT NOT NULL DEFAULT '[]',
    fallback TEXT,
    target_agent_id TEXT,
    timeout_at TEXT,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'resolved', 'timed_out', 'cancelled')),
    resolution TEXT,
    resolved_by TEXT,
    created_at TEXT NOT NULL,
    resolved_at TEXT,
    PRIMARY KEY (workflow_id, id)
) WITHOUT ROWID;
CREATE INDEX decisions_by_status ON pending_decisions (status, target_agent_id);

CREATE TABLE timers (
    workflow_id TEXT NOT NULL,
    timer_id INTEGER NOT NULL,
    due_at TEXT NOT NULL,
    purpose TEXT NOT NULL,
    step_id TEXT,
    PRIMARY KEY (workflow_id, timer_id)
) WITHOUT ROWID;
CREATE INDEX timers_by_due ON timers (due_at);

CREATE TABLE inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_id TEXT NOT NULL,
    event TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX inbox_by_workflow ON inbox (workflow_id, id);

CREATE TABLE leases (
    workflow_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX leases_by_owner ON leases (owner);

CREATE TABLE workflow_templates (
    name TEXT NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 1),
    description TEXT NOT NULL DEFAULT '',
    definition TEXT NOT NULL,
    input_schema TEXT,
    output_schema TEXT,
    triggers TEXT NOT NULL DEFAULT '[]',
    agent_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (name, version)
) WITHOUT ROWID;

CREATE TABLE workflow_context (
    workflow_id TEXT PRIMARY KEY,
    agent_id TEXT,
    original_intent TEXT NOT NULL DEFAULT '',
    accumulated_data TEXT NOT NULL DEFAULT '{}',
    agent_notes TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE scheduled_jobs (
    id TEXT PRIMARY KEY,
    template_name TEXT NOT NULL,
    template_version INTEGER,
    cron_expression TEXT NOT NULL,
    params TEXT NOT NULL DEFAULT '{}',
    agent_id TEXT,
    enabled INTEGER NOT NULL DEFAULT 1,
    last_run_at TEXT,
    next_run_at TEXT,
    last_run_status TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX scheduled_jobs_due ON scheduled_jobs (next_run_at) WHERE enabled = 1;

CREATE TABLE secrets (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;

";

/// Schedules get a timezone, a missed-run policy, their last workflow and
/// where they came from (`cli`, or `trigger` for a template's `triggers.cron`).
const V2: &str = "
ALTER TABLE scheduled_jobs ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC';
ALTER TABLE scheduled_jobs ADD COLUMN missed TEXT NOT NULL DEFAULT 'run_once'
    CHECK (missed IN ('skip', 'run_once'));
ALTER TABLE scheduled_jobs ADD COLUMN last_workflow_id TEXT;
ALTER TABLE scheduled_jobs ADD COLUMN origin TEXT NOT NULL DEFAULT 'cli';
";

/// The vault's per-install key derivation settings and the value that tells
/// a right passphrase from a wrong one (one row).
const V3: &str = "
CREATE TABLE vault (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    salt BLOB NOT NULL,
    iterations INTEGER NOT NULL,
    check_value BLOB NOT NULL,
    created_at TEXT NOT NULL
);
";

/// Fewer pages written per commit (each written page is a WAL frame): the
/// lease moves into the workflow's row, which every commit writes anyway;
/// the status index no longer holds `updated_at` (which every round
/// changes); the agent and parent indexes leave out runs without one.
const V4: &str = "
ALTER TABLE workflows ADD COLUMN lease_owner TEXT;
ALTER TABLE workflows ADD COLUMN lease_expires_at TEXT;
UPDATE workflows SET
    lease_owner = (SELECT owner FROM leases WHERE leases.workflow_id = workflows.id),
    lease_expires_at = (SELECT expires_at FROM leases WHERE leases.workflow_id = workflows.id);
DROP TABLE leases;
DROP INDEX workflows_by_status;
CREATE INDEX workflows_by_status ON workflows (status, created_at DESC);
DROP INDEX workflows_by_agent;
CREATE INDEX workflows_by_agent ON workflows (agent_id, created_at DESC)
    WHERE agent_id IS NOT NULL;
DROP INDEX workflows_by_parent;
CREATE INDEX workflows_by_parent ON workflows (parent_workflow_id)
    WHERE parent_workflow_id IS NOT NULL;
";

/// A run may be `quarantined` (spec/limits.md): SQLite cannot change a
/// CHECK constraint in place, so the table is made again with every row.
const V5: &str = "
CREATE TABLE workflows_v5 (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    template_name TEXT,
    template_version INTEGER,
    source_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'active', 'suspended', 'quarantined', 'completed', 'failed', 'cancelled')),
    agent_id TEXT,
    parent_workflow_id TEXT,
    input_params TEXT NOT NULL DEFAULT '{}',
    output TEXT,
    error TEXT,
    context TEXT,
    base_dir TEXT,
    last_seq INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    started_at TEXT,
    completed_at TEXT,
    updated_at TEXT NOT NULL,
    lease_owner TEXT,
    lease_expires_at TEXT
);
INSERT INTO workflows_v5 (id, name, template_name, template_version, source_hash, status, agent_id,
    parent_workflow_id, input_params, output, error, context, base_dir, last_seq, created_at, started_at,
    completed_at, updated_at, lease_owner, lease_expires_at)
SELECT id, name, template_name, template_version, source_hash, status, agent_id,
    parent_workflow_id, input_params, output, error, context, base_dir, last_seq, created_at, started_at,
    completed_at, updated_at, lease_owner, lease_expires_at FROM workflows;
DROP TABLE workflows;
ALTER TABLE workflows_v5 RENAME TO workflows;
CREATE INDEX workflows_by_status ON workflows (status, created_at DESC);
CREATE INDEX workflows_by_agent ON workflows (agent_id, created_at DESC)
    WHERE agent_id IS NOT NULL;
CREATE INDEX workflows_by_parent ON workflows (parent_workflow_id)
    WHERE parent_workflow_id IS NOT NULL;
CREATE INDEX workflows_by_created ON workflows (created_at DESC);
";

/// Every lease grant gets an epoch, which a writer's commits carry as
/// their fence (spec/store.md): a run's epoch outlives its lease.
const V6: &str = "
ALTER TABLE workflows ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
UPDATE workflows SET lease_epoch = 1 WHERE lease_owner IS NOT NULL;
";
