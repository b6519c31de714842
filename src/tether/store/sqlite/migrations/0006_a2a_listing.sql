-- A2A 1.0: tasks are listed by tenant, newest first, and filtered by state; push configs
-- remember the version they were registered in (their pushes are that version's shape).
ALTER TABLE a2a_tasks ADD COLUMN state TEXT NOT NULL DEFAULT '';
UPDATE a2a_tasks SET state = COALESCE(json_extract(CAST(record AS TEXT), '$.state'), '');
CREATE INDEX a2a_tasks_listing ON a2a_tasks (tenant, updated_at DESC, task_id DESC);
ALTER TABLE push_configs ADD COLUMN version TEXT NOT NULL DEFAULT '0.3';
