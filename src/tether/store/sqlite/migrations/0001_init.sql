-- The run projection: derived from run_events, written in the same transaction.
CREATE TABLE runs (
    run_id        TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    workflow_id   TEXT NOT NULL,
    status        TEXT NOT NULL,
    last_sequence INTEGER NOT NULL,
    state         BLOB NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
-- Tenant-scoped listing, newest first (run ids are time-ordered).
CREATE INDEX runs_by_tenant ON runs (tenant, run_id);
-- Recovery at start reads only the runs that are not finished.
CREATE INDEX runs_active ON runs (status) WHERE status NOT IN ('completed', 'failed', 'cancelled');

-- The source of truth: (run_id, sequence) is unique, so no sequence is ever written twice.
CREATE TABLE run_events (
    run_id   TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    doc      BLOB NOT NULL,
    PRIMARY KEY (run_id, sequence)
) WITHOUT ROWID;

-- One claim per (tenant, scope, key): a repeated request can never create a second run.
CREATE TABLE idempotency (
    tenant         TEXT NOT NULL,
    scope          TEXT NOT NULL,
    key            TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    run_id         TEXT,
    status_code    INTEGER NOT NULL,
    body           BLOB NOT NULL,
    created_at     TEXT NOT NULL,
    PRIMARY KEY (tenant, scope, key)
) WITHOUT ROWID;

-- API keys, hashed; a name is unique among keys that are not revoked.
CREATE TABLE api_keys (
    key_id      TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    scopes      TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE UNIQUE INDEX api_keys_active_name ON api_keys (name) WHERE revoked_at IS NULL;

-- Seeded workflow definitions, stored verbatim.
CREATE TABLE workflows (
    workflow_id TEXT PRIMARY KEY,
    definition  BLOB NOT NULL,
    source      TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
