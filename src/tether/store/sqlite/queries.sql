-- name: insert_run
-- Create a run's projection row.
INSERT INTO runs (run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at)
VALUES (:run_id, :tenant, :workflow_id, :status, :last_sequence, :state, :created_at, :updated_at);

-- name: update_run
-- Compare-and-swap on the sequence the transition was decided on.
UPDATE runs SET status = :status, last_sequence = :last_sequence, state = :state, updated_at = :updated_at
WHERE run_id = :run_id AND last_sequence = :expected_sequence;

-- name: insert_event
-- Append one event; the primary key refuses a duplicate sequence.
INSERT INTO run_events (run_id, sequence, doc) VALUES (:run_id, :sequence, :doc);

-- name: get_run
-- One run by id.
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at FROM runs WHERE run_id = ?;

-- name: get_run_for_tenant
-- One run by id, only if it belongs to the tenant.
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at FROM runs WHERE run_id = ? AND tenant = ?;

-- name: active_runs
-- Runs that recovery must continue.
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at FROM runs
WHERE status NOT IN ('completed', 'failed', 'cancelled') ORDER BY run_id;

-- name: read_events
-- Events after a sequence, in order.
SELECT run_id, sequence, doc FROM run_events WHERE run_id = ? AND sequence > ? ORDER BY sequence LIMIT ?;

-- name: insert_idempotency
-- Claim an idempotency key; the primary key refuses a second claim.
INSERT INTO idempotency (tenant, scope, key, request_digest, run_id, status_code, body, created_at)
VALUES (:tenant, :scope, :key, :request_digest, :run_id, :status_code, :body, :created_at);

-- name: get_idempotency
-- A claimed key and its stored response.
SELECT tenant, scope, key, request_digest, run_id, status_code, body, created_at FROM idempotency
WHERE tenant = ? AND scope = ? AND key = ?;

-- name: insert_key
-- A new API key (hash only).
INSERT INTO api_keys (key_id, name, tenant, scopes, secret_hash, created_at, revoked_at)
VALUES (:key_id, :name, :tenant, :scopes, :secret_hash, :created_at, :revoked_at);

-- name: get_key
-- One key by its public id.
SELECT key_id, name, tenant, scopes, secret_hash, created_at, revoked_at FROM api_keys WHERE key_id = ?;

-- name: list_keys
-- Every key, oldest first.
SELECT key_id, name, tenant, scopes, secret_hash, created_at, revoked_at FROM api_keys ORDER BY created_at, key_id;

-- name: revoke_key
-- Revoke the active key of that name.
UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL;

-- name: get_workflow
-- One stored definition.
SELECT workflow_id, definition, source, updated_at FROM workflows WHERE workflow_id = ?;

-- name: upsert_workflow
-- Store or replace a definition.
INSERT INTO workflows (workflow_id, definition, source, updated_at) VALUES (:workflow_id, :definition, :source, :updated_at)
ON CONFLICT (workflow_id) DO UPDATE SET definition = excluded.definition, source = excluded.source, updated_at = excluded.updated_at;

-- name: list_workflows
-- Every stored definition.
SELECT workflow_id, definition, source, updated_at FROM workflows ORDER BY workflow_id;

-- name: upsert_task
-- Write a task's A2ATaskState (it is a projection: the newest commit wins).
INSERT INTO a2a_tasks (task_id, tenant, principal, context_id, record, updated_at)
VALUES (:task_id, :tenant, :principal, :context_id, :record, :updated_at)
ON CONFLICT (task_id) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at;

-- name: get_task
-- One task record.
SELECT task_id, tenant, principal, context_id, record, updated_at FROM a2a_tasks WHERE task_id = ?;

-- name: get_task_for_tenant
-- One task record, only if it belongs to the tenant.
SELECT task_id, tenant, principal, context_id, record, updated_at FROM a2a_tasks WHERE task_id = ? AND tenant = ?;

-- name: insert_task_message
-- Append a message to a task's history.
INSERT INTO a2a_messages (task_id, message_id, message, created_at) VALUES (:task_id, :message_id, :message, :created_at);

-- name: list_task_messages
-- A task's history, oldest first.
SELECT message FROM a2a_messages WHERE task_id = ? ORDER BY seq;
