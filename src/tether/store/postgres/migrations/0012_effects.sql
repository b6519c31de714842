-- PostgreSQL twin of sqlite/migrations/0012_effects.sql.
CREATE TABLE effects (
    effect_id     TEXT NOT NULL,
    attempt       INTEGER NOT NULL,
    tenant        TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    seam          TEXT NOT NULL,
    keying        TEXT NOT NULL,
    provider_key  TEXT NOT NULL,
    invocation_id TEXT,
    state         TEXT NOT NULL,
    at            TEXT NOT NULL,
    PRIMARY KEY (effect_id, attempt),
    CONSTRAINT effects_state CHECK (state IN ('claimed', 'completed', 'released', 'escaped'))
);
CREATE INDEX effects_by_run ON effects (run_id, at);
CREATE INDEX effects_by_time ON effects (at);
