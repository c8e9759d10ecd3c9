//! The PostgreSQL schema, as numbered migrations (spec/store.md). The
//! tables are the libSQL store's at its schema 9 (but `workflow_context`);
//! times are RFC 3339 text as there, except a lease's expiry, which is
//! `timestamptz` so that it is judged by the database's clock.

/// `(version, name, SQL)`, in order. Never edit a released migration: add
/// the next one.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "initial", V1),
    (2, "large values once", V2),
    (3, "pruned runs", V3),
    (4, "runs by template", V4),
    (5, "refusals raised in the transaction", V5),
    (6, "concurrency slots", V6),
    (7, "rate windows", V7),
    (8, "pending starts", V8),
    (9, "folded entries", V9),
    (10, "sessions and transcripts", V10),
    (11, "agent registry", crate::store::registry::TABLES),
    (12, "agent eval results", crate::store::registry::EVAL_TABLE),
];

/// The newest schema version this build knows.
pub const LATEST: i64 = 12;

/// Agent sessions' turns (spec/agents.md, "Sessions"), in order by `n`,
/// calls' transcripts, deleted with their run, and worktrees' writer
/// leases, judged by the database's clock.
const V10: &str = "
CREATE TABLE session_turns (
    session TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    step TEXT NOT NULL,
    n BIGINT NOT NULL,
    turn TEXT NOT NULL,
    PRIMARY KEY (session, workflow_id, step)
);
CREATE INDEX session_turns_in_order ON session_turns (session, n);
CREATE TABLE transcripts (
    workflow_id TEXT NOT NULL,
    step TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (workflow_id, step, attempt)
);
CREATE TABLE worktree_leases (
    worktree TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX worktree_leases_by_owner ON worktree_leases (owner);
";

/// Every log entry, a commit's several entries kept in one row unfolded
/// (`store/folded.rs`, decision 0050): what queries across runs filter
/// (`store/listing.rs` unfolds the same way).
const V9: &str = "
CREATE VIEW log_entries (workflow_id, seq, at, kind, event_type, step_id, version, payload) AS
SELECT workflow_id, seq, at, kind, event_type, step_id, version, payload FROM events
WHERE event_type <> 'entries'
UNION ALL
SELECT e.workflow_id, e.seq - json_array_length(e.payload::json) + j.ord, e.at,
    j.value ->> 'kind', j.value ->> 'event_type', j.value ->> 'step_id',
    (j.value ->> 'version')::integer, (j.value -> 'payload')::text
FROM events AS e CROSS JOIN LATERAL json_array_elements(e.payload::json) WITH ORDINALITY AS j (value, ord)
WHERE e.event_type = 'entries';
";

/// The runs debounced triggers will start (spec/flow-control.md,
/// "Debounce"); a delivery changes one under an advisory lock on its key.
const V8: &str = "
CREATE TABLE pending_starts (
    template TEXT NOT NULL,
    key TEXT NOT NULL,
    inputs TEXT NOT NULL,
    first_ms BIGINT NOT NULL,
    due_ms BIGINT NOT NULL,
    deliveries BIGINT NOT NULL,
    PRIMARY KEY (template, key)
);
CREATE INDEX pending_starts_by_due ON pending_starts (due_ms);
";

/// The calls counted in each window of each rate limit key
/// (spec/flow-control.md, "Rate limits"); counted under an advisory
/// transaction lock on the key.
const V7: &str = "
CREATE TABLE rate_windows (
    key TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    calls BIGINT NOT NULL,
    PRIMARY KEY (key, start_ms)
);
";

/// The runs of concurrency keys, holding a slot or waiting for one
/// (spec/flow-control.md, "Admission"); admission takes an advisory
/// transaction lock on the key.
const V6: &str = "
CREATE TABLE run_slots (
    key TEXT NOT NULL,
    workflow_id TEXT PRIMARY KEY,
    lim BIGINT NOT NULL,
    turn BIGINT NOT NULL,
    held BIGINT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX run_slots_by_key ON run_slots (key, held, turn);
";

/// A commit's checks raise their refusal, so that a commit's statements
/// can all be sent at once (`commit.rs`): the refusal (`fenced`,
/// `not_found`, `exists`, `outdated`, `conflict`) is the message, the
/// workflow or template the detail, the log's last sequence the hint
/// (PL/pgSQL's own `FOUND` forbids that name for it).
const V5: &str = "
CREATE FUNCTION opcode_refuse(reason TEXT, subject TEXT, seq BIGINT) RETURNS BOOLEAN
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'OC409', MESSAGE = reason, DETAIL = subject,
        HINT = COALESCE(seq::TEXT, '');
END
$$;
";

const V4: &str = "
CREATE INDEX workflows_by_template ON workflows (template_name, created_at DESC)
    WHERE template_name IS NOT NULL;
CREATE INDEX decisions_by_status_time ON pending_decisions (status, created_at);
";

const V3: &str = "
CREATE TABLE pruned_runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    template_name TEXT,
    template_version BIGINT,
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

const V2: &str = "
CREATE TABLE blobs (
    hash TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
";

/// The advisory lock migrations hold, so daemons starting at once apply
/// each migration once (any constant: this one spells "opcode").
pub const MIGRATION_LOCK: i64 = 0x6f70_636f_6465;

const V1: &str = "
CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_seen_at TEXT NOT NULL
);

CREATE TABLE sources (
    hash TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    program BYTEA NOT NULL
);

CREATE TABLE workflows (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    template_name TEXT,
    template_version BIGINT,
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
    last_seq BIGINT NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    started_at TEXT,
    completed_at TEXT,
    updated_at TEXT NOT NULL,
    lease_owner TEXT,
    lease_expires_at TIMESTAMPTZ,
    lease_epoch BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX workflows_by_status ON workflows (status, created_at DESC);
CREATE INDEX workflows_by_agent ON workflows (agent_id, created_at DESC) WHERE agent_id IS NOT NULL;
CREATE INDEX workflows_by_parent ON workflows (parent_workflow_id) WHERE parent_workflow_id IS NOT NULL;
CREATE INDEX workflows_by_created ON workflows (created_at DESC);
CREATE INDEX workflows_by_owner ON workflows (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE events (
    workflow_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('input', 'record', 'note')),
    event_type TEXT NOT NULL,
    step_id TEXT,
    version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (workflow_id, seq)
);

CREATE TABLE step_state (
    workflow_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt BIGINT NOT NULL DEFAULT 0,
    output TEXT,
    error TEXT,
    started_at TEXT,
    completed_at TEXT,
    duration_ms BIGINT,
    PRIMARY KEY (workflow_id, step_id)
);

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
);
CREATE INDEX decisions_by_status ON pending_decisions (status, target_agent_id);

CREATE TABLE timers (
    workflow_id TEXT NOT NULL,
    timer_id BIGINT NOT NULL,
    due_at TEXT NOT NULL,
    purpose TEXT NOT NULL,
    step_id TEXT,
    PRIMARY KEY (workflow_id, timer_id)
);
CREATE INDEX timers_by_due ON timers (due_at);

CREATE TABLE inbox (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    event TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX inbox_by_workflow ON inbox (workflow_id, id);

CREATE TABLE workflow_templates (
    name TEXT NOT NULL,
    version BIGINT NOT NULL CHECK (version >= 1),
    description TEXT NOT NULL DEFAULT '',
    definition TEXT NOT NULL,
    input_schema TEXT,
    output_schema TEXT,
    triggers TEXT NOT NULL DEFAULT '[]',
    agent_id TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE scheduled_jobs (
    id TEXT PRIMARY KEY,
    template_name TEXT NOT NULL,
    template_version BIGINT,
    cron_expression TEXT NOT NULL,
    timezone TEXT NOT NULL DEFAULT 'UTC',
    params TEXT NOT NULL DEFAULT '{}',
    agent_id TEXT,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    missed TEXT NOT NULL DEFAULT 'run_once' CHECK (missed IN ('skip', 'run_once')),
    last_run_at TEXT,
    next_run_at TEXT,
    last_run_status TEXT,
    last_workflow_id TEXT,
    origin TEXT NOT NULL DEFAULT 'cli',
    created_at TEXT NOT NULL
);

CREATE TABLE vault (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    salt BYTEA NOT NULL,
    iterations BIGINT NOT NULL,
    check_value BYTEA NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE secrets (
    key TEXT PRIMARY KEY,
    value BYTEA NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
";
