-- PostgreSQL twin of sqlite/migrations/0009_retention.sql.
CREATE INDEX runs_ended ON runs (updated_at) WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX outbox_by_run ON outbox (run_id);
CREATE INDEX idempotency_by_run ON idempotency (run_id) WHERE run_id IS NOT NULL;
