-- The persisted A2ATaskState of each A2A-backed run, written with the run's events.
CREATE TABLE a2a_tasks (
    task_id    TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    principal  TEXT NOT NULL,
    context_id TEXT NOT NULL,
    record     BLOB NOT NULL,
    updated_at TEXT NOT NULL
);

-- The A2A messages exchanged on a task (Task.history), in arrival order; a message id once.
CREATE TABLE a2a_messages (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT NOT NULL,
    message_id TEXT NOT NULL,
    message    BLOB NOT NULL,
    created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX a2a_messages_once ON a2a_messages (task_id, message_id);
