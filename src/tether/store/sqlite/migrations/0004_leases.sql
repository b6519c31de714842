-- When a run next needs attention without anyone asking (a delay's wake-up, a gate's deadline).
ALTER TABLE runs ADD COLUMN due_at TEXT;
CREATE INDEX runs_due ON runs (due_at) WHERE due_at IS NOT NULL;

-- One execution lease per run: whoever holds a live lease drives it; the epoch fences
-- the writes of a host whose lease was taken over.
CREATE TABLE run_leases (
    run_id     TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at TEXT NOT NULL
);

-- A delivery attempt is claimed by one host at a time.
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claimed_until TEXT;
