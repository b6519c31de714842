-- Several hosts on one database (the same version as sqlite/migrations/0004_*.sql).

-- When a run is next due without anyone asking: a delay's wake-up or a gate's deadline
-- (ISO-8601 TEXT like every other time the host writes). A waiting run whose due_at has
-- passed needs a host even when nobody holds its lease.
ALTER TABLE runs ADD COLUMN due_at TEXT;
CREATE INDEX runs_due ON runs (due_at) WHERE due_at IS NOT NULL;

-- Execution leases: the host that drives a run holds its lease and renews it. A host that
-- takes a lease over raises the epoch, and every commit made under a lease names
-- (owner, epoch), so a host that lost its lease can no longer write (LeaseLost).
-- A released lease is expired in place, not deleted, so the epoch never goes back.
CREATE TABLE run_leases (
    run_id     TEXT NOT NULL,
    owner      TEXT NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT run_leases_one_holder PRIMARY KEY (run_id),
    CONSTRAINT run_leases_epoch_positive CHECK (epoch > 0)
);
COMMENT ON CONSTRAINT run_leases_one_holder ON run_leases IS 'at most one host holds the execution lease of a run';
COMMENT ON CONSTRAINT run_leases_epoch_positive ON run_leases IS 'epochs start at 1 and only go up when the holder changes';
-- renew_leases touches every lease of one host.
CREATE INDEX run_leases_by_owner ON run_leases (owner);

-- Delivery claims: due_deliveries stamps the claiming host and how long its claim holds,
-- so each attempt is made by one host; record_attempt clears the claim.
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claimed_until TIMESTAMPTZ;
ALTER TABLE outbox ADD CONSTRAINT outbox_claim_whole CHECK ((claimed_by IS NULL) = (claimed_until IS NULL));
COMMENT ON CONSTRAINT outbox_claim_whole ON outbox IS 'a delivery claim names both its host and when it lapses, or neither';
