-- PostgreSQL twin of sqlite/migrations/0002_a2a_tasks.sql.

-- The persisted A2ATaskState of each A2A-backed run, written with the run's events.
CREATE TABLE a2a_tasks (
    task_id    TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    principal  TEXT NOT NULL,
    context_id TEXT NOT NULL,
    record     BYTEA NOT NULL,
    updated_at TEXT NOT NULL
);

-- The A2A messages exchanged on a task (Task.history), in arrival order; a message id once.
CREATE TABLE a2a_messages (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    TEXT NOT NULL,
    message_id TEXT NOT NULL,
    message    BYTEA NOT NULL,
    created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX a2a_messages_once ON a2a_messages (task_id, message_id);
COMMENT ON INDEX a2a_messages_once IS 'a message id enters the history of a task once (message_already_recorded)';
