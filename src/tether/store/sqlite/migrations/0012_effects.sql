-- The effect ledger: every attempt at an outside effect a run's engine makes itself (a hand-off's
-- send to its peer, its push-config registration), one row per attempt.
--
-- An effect's id is derived from what it is (tenant, run, node, seam, ordinal), never drawn, so a
-- host that restarts after a crash finds the same effect and claims its next attempt, presenting
-- the same provider key (the outbound Idempotency-Key). An attempt is claimed before it is sent
-- (state 'claimed', the insert that takes its number is the claim) and settled after: 'completed'
-- when the provider answered, 'released' when it did not, or when a later attempt of the same
-- effect was claimed while this one was never settled (a crash between send and record).
-- Deliveries (webhooks, pushes, callbacks) are not written here: their outbox rows are their
-- ledger (queries.sql: list_effects). Rows are kept for 14 days at least, whatever the run's own
-- retention (purge_effects).
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
-- a run's ledger is read by run; the purge finds old rows by time
CREATE INDEX effects_by_run ON effects (run_id, at);
CREATE INDEX effects_by_time ON effects (at);
