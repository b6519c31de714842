-- PostgreSQL twin of sqlite/migrations/0001_init.sql. Blobs are BYTEA, so what was
-- written comes back byte for byte; times are ISO-8601 TEXT, compared as strings,
-- exactly as the SQLite store compares them.

-- The run projection: derived from run_events, written in the same transaction.
CREATE TABLE runs (
    run_id        TEXT NOT NULL,
    tenant        TEXT NOT NULL,
    workflow_id   TEXT NOT NULL,
    status        TEXT NOT NULL,
    last_sequence BIGINT NOT NULL,
    state         BYTEA NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    -- One projection per run: a second create of the same id loses (SequenceConflict).
    CONSTRAINT runs_once PRIMARY KEY (run_id)
);
COMMENT ON CONSTRAINT runs_once ON runs IS 'one projection per run: a second create of the same run id loses';
-- Tenant-scoped listing, newest first (run ids are time-ordered).
CREATE INDEX runs_by_tenant ON runs (tenant, run_id);
-- Recovery at start reads only the runs that are not finished.
CREATE INDEX runs_active ON runs (status) WHERE status NOT IN ('completed', 'failed', 'cancelled');

-- The source of truth: (run_id, sequence) is unique, so no sequence is ever written twice.
CREATE TABLE run_events (
    run_id   TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    doc      BYTEA NOT NULL,
    CONSTRAINT run_events_once PRIMARY KEY (run_id, sequence)
);
COMMENT ON CONSTRAINT run_events_once ON run_events IS 'no sequence of a run is ever written twice';

-- One claim per (tenant, scope, key): a repeated request can never create a second run.
CREATE TABLE idempotency (
    tenant         TEXT NOT NULL,
    scope          TEXT NOT NULL,
    key            TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    run_id         TEXT,
    status_code    INTEGER NOT NULL,
    body           BYTEA NOT NULL,
    created_at     TEXT NOT NULL,
    CONSTRAINT idempotency_once PRIMARY KEY (tenant, scope, key)
);
COMMENT ON CONSTRAINT idempotency_once ON idempotency IS 'a repeated request can never create a second run';

-- API keys, hashed; a name is unique among keys that are not revoked.
CREATE TABLE api_keys (
    key_id      TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    scopes      JSONB NOT NULL,
    secret_hash TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE UNIQUE INDEX api_keys_active_name ON api_keys (name) WHERE revoked_at IS NULL;
COMMENT ON INDEX api_keys_active_name IS 'a key name is unique among the keys that are not revoked';

-- Seeded workflow definitions, stored verbatim.
CREATE TABLE workflows (
    workflow_id TEXT PRIMARY KEY,
    definition  BYTEA NOT NULL,
    source      TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
