-- Task retention: terminal runs are purged once they have ended long enough ago.
--
-- The purge finds runs that ended before a cutoff, oldest first, through an index of
-- terminal runs only (a run's updated_at is when it ended: no commit follows a terminal
-- one), and deletes what each run kept in other tables by run id.
CREATE INDEX runs_ended ON runs (updated_at) WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX outbox_by_run ON outbox (run_id);
CREATE INDEX idempotency_by_run ON idempotency (run_id) WHERE run_id IS NOT NULL;
