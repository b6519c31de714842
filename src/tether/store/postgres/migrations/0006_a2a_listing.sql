-- PostgreSQL twin of sqlite/migrations/0006_a2a_listing.sql.
ALTER TABLE a2a_tasks ADD COLUMN state TEXT NOT NULL DEFAULT '';
UPDATE a2a_tasks SET state = COALESCE(convert_from(record, 'UTF8')::jsonb ->> 'state', '');
CREATE INDEX a2a_tasks_listing ON a2a_tasks (tenant, updated_at DESC, task_id DESC);
ALTER TABLE push_configs ADD COLUMN version TEXT NOT NULL DEFAULT '0.3';
