-- PostgreSQL twin of sqlite/migrations/0003_outbox.sql.

-- A2A push configs: several per task. Tokens and credentials are sealed (AES-GCM).
CREATE TABLE push_configs (
    task_id           TEXT NOT NULL,
    config_id         TEXT NOT NULL,
    tenant            TEXT NOT NULL,
    url               TEXT NOT NULL,
    token_fingerprint TEXT,
    token_secret      BYTEA,
    auth_schemes      JSONB NOT NULL,
    auth_secret       BYTEA,
    -- registration order; a replaced config keeps its place
    registered        BIGINT GENERATED ALWAYS AS IDENTITY,
    created_at        TEXT NOT NULL,
    CONSTRAINT push_configs_once PRIMARY KEY (task_id, config_id)
);
COMMENT ON CONSTRAINT push_configs_once ON push_configs IS 'one config per (task, config id): setting it again replaces it';

-- OpenWOP webhook subscriptions; the signing secret is sealed.
CREATE TABLE webhooks (
    webhook_id         TEXT PRIMARY KEY,
    tenant             TEXT NOT NULL,
    url                TEXT NOT NULL,
    events             JSONB NOT NULL,
    tags               JSONB NOT NULL,
    secret             BYTEA NOT NULL,
    secret_fingerprint TEXT NOT NULL,
    created_at         TEXT NOT NULL
);
CREATE INDEX webhooks_by_tenant ON webhooks (tenant);

-- The durable outbox: one row per delivery, sent at least once and in order per stream.
CREATE TABLE outbox (
    delivery_id     TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    kind            TEXT NOT NULL,
    target_id       TEXT NOT NULL,
    stream_key      TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    sequence        BIGINT NOT NULL,
    url             TEXT NOT NULL,
    body            BYTEA NOT NULL,
    final           BOOLEAN NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at TEXT NOT NULL,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
-- The worker reads only pending rows, by due time.
CREATE INDEX outbox_pending ON outbox (next_attempt_at) WHERE status = 'pending';
-- Order within a stream: a row goes out only when no older pending row of its stream is
-- left, "older" meaning (sequence, delivery_id).
CREATE INDEX outbox_stream ON outbox (stream_key, sequence, delivery_id) WHERE status = 'pending';
