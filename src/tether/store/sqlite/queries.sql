-- name: update_run
-- Compare-and-swap on the sequence the transition was decided on.
UPDATE runs SET status = :status, last_sequence = :last_sequence, state = :state, updated_at = :updated_at, due_at = :due_at
WHERE run_id = :run_id AND last_sequence = :expected_sequence;

-- name: get_run
-- One run by id.
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM runs WHERE run_id = ?;

-- name: get_run_for_tenant
-- One run by id, only if it belongs to the tenant.
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM runs WHERE run_id = ? AND tenant = ?;

-- name: active_runs
-- Runs that recovery must continue.
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM runs
WHERE status NOT IN ('completed', 'failed', 'cancelled') ORDER BY run_id;

-- name: read_events
-- Events after a sequence, in order.
SELECT run_id, sequence, doc FROM run_events WHERE run_id = ? AND sequence > ? ORDER BY sequence LIMIT ?;

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

-- name: insert_credential
-- A new outbound credential (sealed); a second of one name is refused by the primary key.
INSERT INTO outbound_credentials (name, origin, scheme, secret, secret_fingerprint, created_at)
VALUES (:name, :origin, :scheme, :secret, :secret_fingerprint, :created_at);

-- name: get_credential
-- One outbound credential, by name.
SELECT name, origin, scheme, secret, secret_fingerprint, created_at FROM outbound_credentials WHERE name = ?;

-- name: list_credentials
-- Every outbound credential, by name.
SELECT name, origin, scheme, secret, secret_fingerprint, created_at FROM outbound_credentials ORDER BY name;

-- name: delete_credential
-- Forget an outbound credential.
DELETE FROM outbound_credentials WHERE name = ?;

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

-- name: get_task
-- One task record.
SELECT task_id, tenant, principal, context_id, record, updated_at, state FROM a2a_tasks WHERE task_id = ?;

-- name: get_task_for_tenant
-- One task record, only if it belongs to the tenant.
SELECT task_id, tenant, principal, context_id, record, updated_at, state FROM a2a_tasks WHERE task_id = ? AND tenant = ?;

-- name: list_task_messages
-- A task's history, oldest first.
SELECT message FROM a2a_messages WHERE task_id = ? ORDER BY seq;

-- name: list_tasks
-- A tenant's tasks, most recently updated first, after a (updated_at, task_id) cursor.
SELECT task_id, tenant, principal, context_id, record, updated_at, state FROM a2a_tasks
WHERE tenant = :tenant AND (:context_id IS NULL OR context_id = :context_id) AND (:state IS NULL OR state = :state)
  AND (:updated_after IS NULL OR updated_at >= :updated_after)
  AND (:after_at IS NULL OR updated_at < :after_at OR (updated_at = :after_at AND task_id < :after_id))
ORDER BY updated_at DESC, task_id DESC LIMIT :limit;

-- name: count_tasks
-- How many of a tenant's tasks match a listing's filters.
SELECT COUNT(*) FROM a2a_tasks
WHERE tenant = :tenant AND (:context_id IS NULL OR context_id = :context_id) AND (:state IS NULL OR state = :state)
  AND (:updated_after IS NULL OR updated_at >= :updated_after);

-- name: upsert_push_config
-- Register (or replace) a push config of a task.
INSERT INTO push_configs (task_id, config_id, tenant, url, token_fingerprint, token_secret, auth_schemes, auth_secret, registered, created_at, version)
VALUES (:task_id, :config_id, :tenant, :url, :token_fingerprint, :token_secret, :auth_schemes, :auth_secret,
        (SELECT COALESCE(MAX(registered), 0) + 1 FROM push_configs), :created_at, :version)
ON CONFLICT (task_id, config_id) DO UPDATE SET url = excluded.url, token_fingerprint = excluded.token_fingerprint,
    token_secret = excluded.token_secret, auth_schemes = excluded.auth_schemes, auth_secret = excluded.auth_secret,
    version = excluded.version;

-- name: list_push_configs
-- A task's push configs, in registration order.
SELECT task_id, config_id, tenant, url, token_fingerprint, token_secret, auth_schemes, auth_secret, created_at, version
FROM push_configs WHERE task_id = ? ORDER BY registered;

-- name: delete_push_config
-- Forget a push config and its sealed credentials.
DELETE FROM push_configs WHERE task_id = ? AND config_id = ?;

-- name: discard_push_secrets
-- After a task's final push, its credentials are no longer needed: drop them.
UPDATE push_configs SET token_secret = NULL, auth_secret = NULL WHERE task_id = ? AND config_id = ?;

-- name: insert_webhook
-- A new webhook subscription.
INSERT INTO webhooks (webhook_id, tenant, url, events, tags, secret, secret_fingerprint, created_at, major)
VALUES (:webhook_id, :tenant, :url, :events, :tags, :secret, :secret_fingerprint, :created_at, :major);

-- name: get_webhook
-- One webhook.
SELECT webhook_id, tenant, url, events, tags, secret, secret_fingerprint, created_at, major FROM webhooks WHERE webhook_id = ?;

-- name: tenant_webhooks
-- The webhooks of a tenant (fan-out candidates).
SELECT webhook_id, tenant, url, events, tags, secret, secret_fingerprint, created_at, major FROM webhooks WHERE tenant = ?;

-- name: webhook_tenants
-- The tenants that have a webhook (read at open: whose fan-outs may match).
SELECT DISTINCT tenant FROM webhooks;

-- name: push_config_tasks
-- The tasks that have a push config (read at open: whose pushes may match).
SELECT DISTINCT task_id FROM push_configs;

-- name: delete_webhook
-- Unsubscribe.
DELETE FROM webhooks WHERE tenant = ? AND webhook_id = ?;

-- name: due_deliveries
-- Due pending deliveries that head their stream (read from the outbox_due index, so the cost
-- does not grow with the backlog), but for those this host is sending (?2: a JSON array of
-- delivery ids); at most ?3, by due time.
SELECT o.delivery_id, o.tenant, o.kind, o.target_id, o.stream_key, o.run_id, o.sequence, o.url, o.body, o.final, o.status,
       o.attempts, o.next_attempt_at, o.last_error, o.created_at, o.updated_at
FROM outbox o
WHERE o.status = 'pending' AND o.head = 1 AND o.next_attempt_at <= ?1
  AND o.delivery_id NOT IN (SELECT value FROM json_each(?2))
ORDER BY o.next_attempt_at, o.delivery_id LIMIT ?3;

-- name: next_delivery_at
-- When the worker must next wake up: the earliest due time of a stream head this host is not
-- sending already (?1: a JSON array of delivery ids).
SELECT o.next_attempt_at FROM outbox o
WHERE o.status = 'pending' AND o.head = 1 AND o.delivery_id NOT IN (SELECT value FROM json_each(?1))
ORDER BY o.next_attempt_at, o.delivery_id LIMIT 1;

-- name: record_attempt
-- The outcome of one attempt (the triggers of migration 0007 move the stream's head on).
UPDATE outbox SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ?, updated_at = ? WHERE delivery_id = ?;

-- name: enqueued_behind
-- Deliveries just enqueued (?1: a JSON array of ids) wait behind an older pending row of their
-- stream, if there is one (rows of one batch among them).
UPDATE outbox SET head = 0
WHERE delivery_id IN (SELECT value FROM json_each(?1))
  AND EXISTS (SELECT 1 FROM outbox p WHERE p.stream_key = outbox.stream_key AND p.status = 'pending'
              AND (p.sequence, p.delivery_id) < (outbox.sequence, outbox.delivery_id));

-- name: promote_heads
-- Of the deliveries just recorded (?1: a JSON array of ids), those that are done (delivered or
-- dead) hand their stream to its oldest pending row.
UPDATE outbox SET head = 1
WHERE delivery_id IN (
    SELECT (SELECT p.delivery_id FROM outbox p WHERE p.stream_key = d.stream_key AND p.status = 'pending'
            ORDER BY p.sequence, p.delivery_id LIMIT 1)
    FROM outbox d WHERE d.delivery_id IN (SELECT value FROM json_each(?1)) AND d.status IN ('delivered', 'dead'));

-- name: redelivered_head
-- A dead delivery sent again (?1) heads its stream unless a pending row heads it already (then,
-- being older, it is promoted when that one is done).
UPDATE outbox SET head = NOT EXISTS (SELECT 1 FROM outbox p WHERE p.stream_key = outbox.stream_key
                                     AND p.status = 'pending' AND p.head = 1 AND p.delivery_id <> outbox.delivery_id)
WHERE delivery_id = ?1;

-- name: final_pushes_done
-- Of the deliveries just recorded (?1: a JSON array of ids), the final pushes that are
-- delivered or dead: their configs' credentials are no longer needed.
SELECT stream_key, target_id FROM outbox
WHERE delivery_id IN (SELECT value FROM json_each(?1))
  AND kind = 'a2a-push' AND final = 1 AND status IN ('delivered', 'dead');

-- name: get_delivery
-- One delivery.
SELECT delivery_id, tenant, kind, target_id, stream_key, run_id, sequence, url, body, final, status, attempts,
       next_attempt_at, last_error, created_at, updated_at FROM outbox WHERE delivery_id = ?;

-- name: claim_run
-- Take (or keep) a run's execution lease; the epoch goes up when the holder changes.
INSERT INTO run_leases (run_id, owner, epoch, expires_at) VALUES (:run_id, :owner, 1, :expires_at)
ON CONFLICT (run_id) DO UPDATE SET
    epoch = CASE WHEN run_leases.owner = excluded.owner THEN run_leases.epoch ELSE run_leases.epoch + 1 END,
    owner = excluded.owner,
    expires_at = excluded.expires_at
WHERE run_leases.owner = excluded.owner OR run_leases.expires_at < :now
RETURNING epoch;

-- name: check_fence
-- The lease a fenced write claims to hold.
SELECT 1 FROM run_leases WHERE run_id = ? AND owner = ? AND epoch = ? AND expires_at >= ?;

-- name: renew_leases
-- Extend the owner's live leases.
UPDATE run_leases SET expires_at = ? WHERE owner = ? AND expires_at >= ? RETURNING run_id;

-- name: release_run
-- Give a lease up: expire it in place, so the next holder's epoch is still higher.
UPDATE run_leases SET expires_at = '' WHERE run_id = ? AND owner = ?;

-- name: orphaned_runs
-- Runs that need a host and have none.
SELECT r.run_id FROM runs r
WHERE (r.status IN ('pending', 'running', 'cancelling')
       OR (r.status IN ('waiting-approval', 'waiting-input', 'waiting-external') AND r.due_at IS NOT NULL AND r.due_at <= ?))
  AND NOT EXISTS (SELECT 1 FROM run_leases l WHERE l.run_id = r.run_id AND l.expires_at >= ?)
ORDER BY r.run_id LIMIT ?;

-- name: claim_setting
-- Record a setting unless one is there already.
INSERT INTO host_settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING;

-- name: get_setting
-- One setting.
SELECT value FROM host_settings WHERE name = ?;

-- name: settings_under
-- The settings whose names start with ?1 (a prefix free of LIKE's wildcards is compared as text).
SELECT name, value FROM host_settings WHERE substr(name, 1, length(?1)) = ?1 ORDER BY name;

-- name: purgeable_runs
-- Runs that ended before ?1, oldest first, of tenant ?2 (NULL: any tenant), with no delivery
-- still pending (a push or webhook in flight keeps its run) and no dead letter that died after
-- ?1 (a dead letter stays readable as long as a run is kept after it ended); at most ?3.
SELECT r.run_id FROM runs r
WHERE r.status IN ('completed', 'failed', 'cancelled') AND r.updated_at < ?1
  AND (?2 IS NULL OR r.tenant = ?2)
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.run_id = r.run_id AND o.status = 'pending')
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.run_id = r.run_id AND o.status = 'dead' AND o.updated_at >= ?1)
ORDER BY r.updated_at LIMIT ?3;

-- name: purge_run_events
DELETE FROM run_events WHERE run_id IN (SELECT value FROM json_each(?));

-- name: purge_task_messages
DELETE FROM a2a_messages WHERE task_id IN (SELECT value FROM json_each(?));

-- name: purge_tasks
DELETE FROM a2a_tasks WHERE task_id IN (SELECT value FROM json_each(?));

-- name: purge_push_configs
DELETE FROM push_configs WHERE task_id IN (SELECT value FROM json_each(?));

-- name: purge_deliveries
DELETE FROM outbox WHERE run_id IN (SELECT value FROM json_each(?));

-- name: purge_idempotency
-- The claims that started or answered these runs: the same request, sent again, starts anew.
DELETE FROM idempotency WHERE run_id IN (SELECT value FROM json_each(?));

-- name: purge_leases
DELETE FROM run_leases WHERE run_id IN (SELECT value FROM json_each(?));

-- name: purge_runs
DELETE FROM runs WHERE run_id IN (SELECT value FROM json_each(?));

-- name: dead_letters
-- The dead deliveries of subscriber ?2 of tenant ?1, newest first, older than delivery ?3 (NULL:
-- from the newest); at most ?4. Read through the outbox_dead index.
SELECT delivery_id, tenant, kind, target_id, stream_key, run_id, sequence, url, body, final, status, attempts,
       next_attempt_at, last_error, created_at, updated_at FROM outbox
WHERE status = 'dead' AND target_id = ?2 AND tenant = ?1 AND (?3 IS NULL OR delivery_id < ?3)
ORDER BY delivery_id DESC LIMIT ?4;

-- file bytes ---------------------------------------------------------------------------------

-- name: read_blobs
-- The bytes of those of the blobs ?2 (digests, a JSON array) that run ?1 is linked to.
SELECT b.digest, b.data FROM run_blobs l JOIN blobs b ON b.digest = l.digest
WHERE l.run_id = ?1 AND l.digest IN (SELECT value FROM json_each(?2));

-- name: purge_blobs
-- The blobs the runs ?1 (a JSON array) are linked to that no other run is: deleted before the
-- links (purge_run_blobs). Whatever writes a new link writes the blob with it, in the writer's
-- next transaction, so a blob is never taken from under a run that refers to it.
DELETE FROM blobs
WHERE digest IN (SELECT l.digest FROM run_blobs l WHERE l.run_id IN (SELECT value FROM json_each(?1)))
  AND NOT EXISTS (SELECT 1 FROM run_blobs o
                  WHERE o.digest = blobs.digest AND o.run_id NOT IN (SELECT value FROM json_each(?1)));

-- name: purge_run_blobs
DELETE FROM run_blobs WHERE run_id IN (SELECT value FROM json_each(?));

-- the effect ledger ------------------------------------------------------------------------------

-- name: release_effect_claims
-- Before a new attempt of effect ?1 is claimed: an attempt still claimed was never settled (its
-- host died between the send and the record), so it is released, its time kept.
UPDATE effects SET state = 'released' WHERE effect_id = ?1 AND state = 'claimed';

-- name: claim_effect
-- The next attempt of an effect, claimed: the insert that takes its number is the claim (the
-- primary key refuses a second claim of one number); the attempt's number comes back.
INSERT INTO effects (effect_id, attempt, tenant, run_id, node_id, seam, keying, provider_key, invocation_id, state, at)
SELECT :effect_id, COALESCE(MAX(attempt), 0) + 1, :tenant, :run_id, :node_id, :seam, :keying, :provider_key,
       :invocation_id, 'claimed', :at
FROM effects WHERE effect_id = :effect_id
RETURNING attempt;

-- name: settle_effect
-- An attempt's outcome: only a claimed attempt is settled (a released one stays released).
UPDATE effects SET state = ?3 WHERE effect_id = ?1 AND attempt = ?2 AND state = 'claimed';

-- name: list_effects
-- Run ?1's ledger, oldest first: the attempts written here, and each delivery the run caused
-- (a webhook, an A2A push, its callback) that was attempted at least once, read from its outbox
-- row: one row for its latest attempt, keyed on the delivery itself (its id is its
-- Idempotency-Key and its webhook-id). A delivery's node is the node of the event that caused it.
SELECT effect_id, attempt, node_id, seam, keying, provider_key, invocation_id, state, at
FROM effects WHERE run_id = ?1
UNION ALL
SELECT o.delivery_id, o.attempts,
       COALESCE((SELECT json_extract(CAST(e.doc AS TEXT), '$.nodeId') FROM run_events e
                 WHERE e.run_id = o.run_id AND e.sequence = o.sequence), 'tether:run'),
       CASE o.kind WHEN 'webhook' THEN 'openwop.webhook.delivery' WHEN 'a2a-push' THEN 'a2a.push.delivery'
                   ELSE 'openwop.callback.delivery' END,
       'business-identity', o.delivery_id, NULL,
       CASE o.status WHEN 'delivered' THEN 'completed' ELSE 'released' END, o.updated_at
FROM outbox o WHERE o.run_id = ?1 AND o.attempts > 0
ORDER BY 9, 1, 2;

-- name: purge_effects
-- Ledger rows older than ?1, at most ?2 of them (the ledger outlives its run's own window).
DELETE FROM effects WHERE rowid IN (SELECT rowid FROM effects WHERE at < ?1 LIMIT ?2);
