-- Named queries of the PostgreSQL store. Parameters are positional ($1, $2, ...); the
-- line under each name says what the query does, and the order of its parameters.

-- migrations ---------------------------------------------------------------------------

-- name: lock_migrations
-- Serialise schema changes between hosts starting at once (released at commit).
SELECT pg_advisory_xact_lock(hashtext('tether.schema_migrations'));

-- name: create_migrations_table
-- The applied migration versions.
CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());

-- name: migration_applied
-- Whether version $1 is applied.
SELECT 1 FROM schema_migrations WHERE version = $1;

-- name: record_migration
-- Mark version $1 applied.
INSERT INTO schema_migrations (version) VALUES ($1);

-- runs and events ------------------------------------------------------------------------

-- name: insert_run
-- Create a run's projection row; no row back means the id exists already.
-- ($1 run_id, $2 tenant, $3 workflow_id, $4 status, $5 last_sequence, $6 state, $7 created_at, $8 updated_at, $9 due_at)
INSERT INTO runs (run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (run_id) DO NOTHING
RETURNING run_id;

-- name: update_run
-- Compare-and-swap on the sequence the transition was decided on; a terminal run takes no
-- commit (terminal states absorb: a host that holds a terminal task answers it from memory).
-- ($1 run_id, $2 status, $3 last_sequence, $4 state, $5 updated_at, $6 due_at, $7 expected_sequence)
UPDATE runs SET status = $2, last_sequence = $3, state = $4, updated_at = $5, due_at = $6
WHERE run_id = $1 AND last_sequence = $7 AND status NOT IN ('completed', 'failed', 'cancelled');

-- name: insert_events
-- Append events ($1 run ids, $2 sequences, $3 docs); the primary key refuses a duplicate sequence.
INSERT INTO run_events (run_id, sequence, doc)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[]);

-- name: get_run
-- One run by id ($1).
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM runs WHERE run_id = $1;

-- name: get_run_for_tenant
-- One run by id ($1), only if it belongs to the tenant ($2).
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM runs
WHERE run_id = $1 AND tenant = $2;

-- name: list_runs
-- A tenant's runs ($1), newest first; optional status ($2), workflow ($3) and cursor ($4: ids before it); $5 limit.
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM runs
WHERE tenant = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR workflow_id = $3)
  AND ($4::text IS NULL OR run_id < $4)
ORDER BY run_id DESC LIMIT $5;

-- name: active_runs
-- Runs that recovery must continue.
SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM runs
WHERE status NOT IN ('completed', 'failed', 'cancelled') ORDER BY run_id;

-- name: read_events
-- Events of run $1 after sequence $2, in order, at most $3.
SELECT run_id, sequence, doc FROM run_events WHERE run_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3;

-- idempotency ----------------------------------------------------------------------------

-- name: claim_idempotency
-- Claim an idempotency key; no row back means it was claimed before (a concurrent claim
-- waits on the primary key until the first one commits or rolls back).
-- ($1 tenant, $2 scope, $3 key, $4 request_digest, $5 run_id, $6 status_code, $7 body, $8 created_at)
INSERT INTO idempotency (tenant, scope, key, request_digest, run_id, status_code, body, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant, scope, key) DO NOTHING
RETURNING key;

-- name: get_idempotency
-- A claimed key ($1 tenant, $2 scope, $3 key) and its stored response.
SELECT tenant, scope, key, request_digest, run_id, status_code, body, created_at FROM idempotency
WHERE tenant = $1 AND scope = $2 AND key = $3;

-- leases ---------------------------------------------------------------------------------

-- name: check_fence
-- The live lease of run $1 held by owner $2 at epoch $3, locked until the commit ends so
-- that no takeover can slip between the check and the write.
SELECT epoch FROM run_leases WHERE run_id = $1 AND owner = $2 AND epoch = $3 AND expires_at >= now() FOR UPDATE;

-- name: claim_run
-- Take or keep the lease of run $1 for owner $2 for $3 seconds: granted when the owner
-- holds it already or it has lapsed; the epoch goes up when the holder changes.
-- Its commit does not wait for the WAL flush (synchronous_commit off, for this statement's
-- transaction only): a lease is only ever relied on through check_fence, inside a write
-- that commits synchronously, which flushes the claim with it. A claim lost with the
-- database server's crash (the last ~200 ms of them) fails the holder's next fenced write, as
-- a lapsed lease does: meanwhile another host may take the run and run its step again, which
-- a lease that lapses allows too (steps are at least once; their effects carry stable ids).
INSERT INTO run_leases (run_id, owner, epoch, expires_at)
SELECT $1, $2, 1, now() + make_interval(secs => $3)
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed
ON CONFLICT (run_id) DO UPDATE SET
    owner = excluded.owner,
    epoch = CASE WHEN run_leases.owner = excluded.owner THEN run_leases.epoch ELSE run_leases.epoch + 1 END,
    expires_at = excluded.expires_at
WHERE run_leases.owner = excluded.owner OR run_leases.expires_at < now()
RETURNING epoch;

-- name: renew_leases
-- Extend by $2 seconds every live lease owner $1 holds; returns the runs still held.
UPDATE run_leases SET expires_at = now() + make_interval(secs => $2)
WHERE owner = $1 AND expires_at >= now()
RETURNING run_id;

-- name: release_run
-- Give up the lease of run $1 if owner $2 holds it: lapse it in place, keeping the epoch.
-- Unflushed, as claim_run: a release lost with the database server's crash leaves the lease
-- to lapse at its expiry.
UPDATE run_leases SET expires_at = '-infinity'
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed
WHERE run_id = $1 AND owner = $2;

-- name: orphaned_runs
-- Runs that need a host and have no live lease: executing ones, and waiting ones whose
-- due_at has passed ($1 now); $2 limit.
SELECT r.run_id FROM runs r
WHERE (r.status IN ('pending', 'running', 'cancelling')
       OR (r.status IN ('waiting-approval', 'waiting-input', 'waiting-external') AND r.due_at <= $1))
  AND NOT EXISTS (SELECT 1 FROM run_leases l WHERE l.run_id = r.run_id AND l.expires_at >= now())
ORDER BY r.run_id LIMIT $2;

-- name: notify_runs
-- Hint the other hosts (channel $1, payloads $2, each "<origin>:<run id>"), all in one
-- statement; sent outside any write.
SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload;

-- name: keepalive
-- Prove the listener's connection is still alive.
SELECT 1;

-- keys -----------------------------------------------------------------------------------

-- name: insert_key
-- A new API key (hash only); no row back means an active key has that name.
-- ($1 key_id, $2 name, $3 tenant, $4 scopes, $5 secret_hash, $6 created_at, $7 revoked_at)
INSERT INTO api_keys (key_id, name, tenant, scopes, secret_hash, created_at, revoked_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING
RETURNING key_id;

-- name: get_key
-- One key by its public id ($1).
SELECT key_id, name, tenant, scopes, secret_hash, created_at, revoked_at FROM api_keys WHERE key_id = $1;

-- name: list_keys
-- Every key, oldest first.
SELECT key_id, name, tenant, scopes, secret_hash, created_at, revoked_at FROM api_keys ORDER BY created_at, key_id;

-- name: revoke_key
-- Revoke ($1 revoked_at) the active key of that name ($2).
UPDATE api_keys SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL;

-- outbound credentials -------------------------------------------------------------------

-- name: insert_credential
-- A new outbound credential (sealed); no row back means one of that name exists.
-- ($1 name, $2 origin, $3 scheme, $4 secret, $5 secret_fingerprint, $6 created_at)
INSERT INTO outbound_credentials (name, origin, scheme, secret, secret_fingerprint, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
RETURNING name;

-- name: get_credential
-- One outbound credential, by name ($1).
SELECT name, origin, scheme, secret, secret_fingerprint, created_at FROM outbound_credentials WHERE name = $1;

-- name: list_credentials
-- Every outbound credential, by name.
SELECT name, origin, scheme, secret, secret_fingerprint, created_at FROM outbound_credentials ORDER BY name;

-- name: delete_credential
-- Forget an outbound credential ($1 name).
DELETE FROM outbound_credentials WHERE name = $1;

-- workflows ------------------------------------------------------------------------------

-- name: insert_workflow
-- Store a definition not seen before ($1 workflow_id, $2 definition, $3 source, $4 updated_at).
INSERT INTO workflows (workflow_id, definition, source, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (workflow_id) DO NOTHING
RETURNING workflow_id;

-- name: lock_workflow
-- The stored definition of $1, locked while it is compared.
SELECT definition FROM workflows WHERE workflow_id = $1 FOR UPDATE;

-- name: update_workflow
-- Replace a definition ($1 workflow_id, $2 definition, $3 source, $4 updated_at).
UPDATE workflows SET definition = $2, source = $3, updated_at = $4 WHERE workflow_id = $1;

-- name: list_workflows
-- Every stored definition.
SELECT workflow_id, definition, source, updated_at FROM workflows ORDER BY workflow_id;

-- A2A tasks --------------------------------------------------------------------------------

-- name: upsert_task
-- Write a task's A2ATaskState (a projection: the newest commit wins).
-- ($1 task_id, $2 tenant, $3 principal, $4 context_id, $5 record, $6 updated_at, $7 state)
INSERT INTO a2a_tasks (task_id, tenant, principal, context_id, record, updated_at, state)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (task_id) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at, state = excluded.state;

-- name: list_tasks
-- A tenant's tasks ($1), newest first: context ($2), state ($3), updated at or after ($4), after the cursor ($5, $6).
SELECT task_id, tenant, principal, context_id, record, updated_at, state FROM a2a_tasks
WHERE tenant = $1 AND ($2::text IS NULL OR context_id = $2) AND ($3::text IS NULL OR state = $3)
  AND ($4::text IS NULL OR updated_at >= $4)
  AND ($5::text IS NULL OR updated_at < $5 OR (updated_at = $5 AND task_id < $6))
ORDER BY updated_at DESC, task_id DESC LIMIT $7;

-- name: count_tasks
-- How many of a tenant's tasks ($1) match a listing's filters ($2 context, $3 state, $4 updated after).
SELECT COUNT(*) FROM a2a_tasks
WHERE tenant = $1 AND ($2::text IS NULL OR context_id = $2) AND ($3::text IS NULL OR state = $3)
  AND ($4::text IS NULL OR updated_at >= $4);

-- name: get_task
-- One task record ($1).
SELECT task_id, tenant, principal, context_id, record, updated_at, state FROM a2a_tasks WHERE task_id = $1;

-- name: get_task_for_tenant
-- One task record ($1), only if it belongs to the tenant ($2).
SELECT task_id, tenant, principal, context_id, record, updated_at, state FROM a2a_tasks WHERE task_id = $1 AND tenant = $2;

-- name: insert_task_message
-- Append a message to a task's history; no row back means that message id is there already.
-- ($1 task_id, $2 message_id, $3 message, $4 created_at)
INSERT INTO a2a_messages (task_id, message_id, message, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (task_id, message_id) DO NOTHING
RETURNING seq;

-- name: list_task_messages
-- A task's history ($1), oldest first.
SELECT message FROM a2a_messages WHERE task_id = $1 ORDER BY seq;

-- push configs ---------------------------------------------------------------------------

-- name: upsert_push_config
-- Register (or replace, keeping its place) a push config of a task.
-- ($1 task_id, $2 config_id, $3 tenant, $4 url, $5 token_fingerprint, $6 token_secret, $7 auth_schemes, $8 auth_secret, $9 created_at, $10 version)
INSERT INTO push_configs (task_id, config_id, tenant, url, token_fingerprint, token_secret, auth_schemes, auth_secret, created_at, version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (task_id, config_id) DO UPDATE SET url = excluded.url, token_fingerprint = excluded.token_fingerprint,
    token_secret = excluded.token_secret, auth_schemes = excluded.auth_schemes, auth_secret = excluded.auth_secret,
    version = excluded.version;

-- name: list_push_configs
-- A task's push configs ($1), in registration order.
SELECT task_id, config_id, tenant, url, token_fingerprint, token_secret, auth_schemes, auth_secret, created_at, version
FROM push_configs WHERE task_id = $1 ORDER BY registered;

-- name: delete_push_config
-- Forget a push config ($1 task_id, $2 config_id) and its sealed credentials.
DELETE FROM push_configs WHERE task_id = $1 AND config_id = $2;

-- webhooks -------------------------------------------------------------------------------

-- name: insert_webhook
-- A new webhook subscription.
-- ($1 webhook_id, $2 tenant, $3 url, $4 events, $5 tags, $6 secret, $7 secret_fingerprint, $8 created_at, $9 major)
INSERT INTO webhooks (webhook_id, tenant, url, events, tags, secret, secret_fingerprint, created_at, major)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: get_webhook
-- One webhook ($1).
SELECT webhook_id, tenant, url, events, tags, secret, secret_fingerprint, created_at, major FROM webhooks WHERE webhook_id = $1;

-- name: tenant_webhooks
-- The webhooks of a tenant ($1): fan-out candidates.
SELECT webhook_id, tenant, url, events, tags, secret, secret_fingerprint, created_at, major FROM webhooks WHERE tenant = $1;

-- name: delete_webhook
-- Unsubscribe ($1 tenant, $2 webhook_id).
DELETE FROM webhooks WHERE tenant = $1 AND webhook_id = $2;

-- the outbox -----------------------------------------------------------------------------

-- name: insert_deliveries
-- Enqueue deliveries, one per array element; they are pending and due at once, and each
-- heads its stream unless a pending row of the stream is there already. That check is a
-- scalar sub-select, a probe by key: as NOT EXISTS, the plan a connection made while the
-- outbox was tiny read it whole (see commit_group). (The array's stream keys are distinct:
-- one per target. A delivery of a run is enqueued under the run row's
-- lock, which record_attempts also takes, so the flag and a head's end never race.)
-- ($1 delivery ids, $2 target ids, $3 stream keys, $4 urls, then one value for all:
--  $5 tenant, $6 kind, $7 run_id, $8 sequence, $9 body, $10 final, $11 now)
INSERT INTO outbox (delivery_id, tenant, kind, target_id, stream_key, run_id, sequence, url, body, final, status, attempts,
                    next_attempt_at, last_error, created_at, updated_at, head)
SELECT d.delivery_id, $5::text, $6::text, d.target_id, d.stream_key, $7::text, $8::bigint, d.url, $9::bytea, $10::boolean,
       'pending', 0, $11::text, NULL, $11::text, $11::text,
       (SELECT true FROM outbox p WHERE p.stream_key = d.stream_key AND p.status = 'pending' LIMIT 1) IS NULL
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS d(delivery_id, target_id, stream_key, url);

-- name: due_deliveries
-- Claim for owner $3 for $4 seconds the due ($1 now) pending deliveries that head their
-- stream and that no live claim holds, at most $2, in one statement: rows another host is
-- claiming right now are skipped (SKIP LOCKED), never waited for. Heads are read from the
-- outbox_due index, so the cost does not grow with the backlog; the sub-select is one index
-- probe per candidate, and keeps the order even if a head flag were ever wrong.
WITH due AS (
    SELECT o.delivery_id FROM outbox o
    WHERE o.status = 'pending' AND o.head AND o.next_attempt_at <= $1
      AND (o.claimed_until IS NULL OR o.claimed_until < now())
      AND (SELECT true FROM outbox p WHERE p.status = 'pending' AND p.stream_key = o.stream_key
           AND (p.sequence, p.delivery_id) < (o.sequence, o.delivery_id) LIMIT 1) IS NULL
    ORDER BY o.next_attempt_at, o.delivery_id
    LIMIT $2
    FOR UPDATE OF o SKIP LOCKED
), claimed AS (
    UPDATE outbox SET claimed_by = $3, claimed_until = now() + make_interval(secs => $4)
    FROM due WHERE outbox.delivery_id = due.delivery_id
    RETURNING outbox.delivery_id, outbox.tenant, outbox.kind, outbox.target_id, outbox.stream_key, outbox.run_id,
              outbox.sequence, outbox.url, outbox.body, outbox.final, outbox.status, outbox.attempts,
              outbox.next_attempt_at, outbox.last_error, outbox.created_at, outbox.updated_at
)
SELECT * FROM claimed ORDER BY next_attempt_at, delivery_id;

-- name: next_delivery_at
-- When the worker must next wake up: the earliest time a stream head becomes due and
-- unclaimed (a claim's lapse is written in the same ISO-8601 form as the other times). Both
-- halves read an index: unclaimed heads by due time, claims by when they lapse.
SELECT LEAST(
    (SELECT o.next_attempt_at FROM outbox o
     WHERE o.status = 'pending' AND o.head AND (o.claimed_until IS NULL OR o.claimed_until < now())
     ORDER BY o.next_attempt_at LIMIT 1),
    (SELECT MIN(GREATEST(o.next_attempt_at, to_char(o.claimed_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
     FROM outbox o WHERE o.claimed_until >= now() AND o.status = 'pending' AND o.head));

-- name: release_claims
-- A host starting again ($1, its stable name) drops the claims its previous life held.
UPDATE outbox SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by = $1;

-- name: attempts_settings
-- Before recording attempts, for their transaction only: plan them for the outbox as it is now
-- (a plan cached while it was empty reads it whole, a seq scan of the backlog per batch, until
-- the table is next analyzed), and commit without waiting for the WAL flush. A receipt (the
-- receiver's 2xx) is unrecorded until the commit returns, and a crash of the host meanwhile
-- sends it again; the host's crash cannot undo a commit the server has, and the server's own
-- crash loses at most its last fraction of a second of outcomes, which are then sent again,
-- with the same webhook-id, as at least once allows.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true), set_config('synchronous_commit', 'off', true);

-- name: lock_attempt_runs
-- Before recording attempts ($1 delivery ids): hold the runs they belong to, ordered, against
-- a commit that would enqueue behind one of them meanwhile (it updates the run row first), so
-- that a head's end and the flag of a row enqueued behind it never race.
SELECT r.run_id FROM runs r
WHERE r.run_id IN (SELECT o.run_id FROM outbox o WHERE o.delivery_id = ANY($1::text[]))
ORDER BY r.run_id FOR SHARE OF r;

-- name: record_attempts
-- The outcomes of many attempts in one statement, which ends their claims; a final push that
-- is delivered or dead no longer needs its config's credentials, so they are dropped in the
-- same statement, and the oldest pending row of each stream whose head is done heads it now.
-- The statement sees the rows it records as they were (pending): they are left out of that
-- choice by id. (Only a stream's head is ever claimed, so a stream has one row here at most.)
-- One statement, not three: a receipt is unrecorded for as long as it takes, and each round
-- trip waits for the host's event loop.
-- ($1 delivery ids, $2 statuses, $3 attempts, $4 next_attempt_at, $5 last_error, $6 now: arrays)
WITH attempt AS (
    UPDATE outbox SET status = a.status, attempts = a.attempts, next_attempt_at = a.next_attempt_at,
                      last_error = a.last_error, updated_at = a.now, claimed_by = NULL, claimed_until = NULL
    FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[])
         AS a(delivery_id, status, attempts, next_attempt_at, last_error, now)
    WHERE outbox.delivery_id = a.delivery_id
    RETURNING outbox.kind, outbox.final, outbox.stream_key, outbox.target_id, outbox.status IN ('delivered', 'dead') AS done
), discarded AS (
    UPDATE push_configs SET token_secret = NULL, auth_secret = NULL
    FROM attempt
    WHERE attempt.done AND attempt.kind = 'a2a-push' AND attempt.final
      AND push_configs.task_id = split_part(attempt.stream_key, ':', 2) AND push_configs.config_id = attempt.target_id
), next_head AS (
    SELECT DISTINCT ON (p.stream_key) p.delivery_id FROM outbox p
    WHERE p.stream_key IN (SELECT stream_key FROM attempt WHERE done) AND p.status = 'pending'
      AND p.delivery_id <> ALL($1::text[])
    ORDER BY p.stream_key, p.sequence, p.delivery_id
)
UPDATE outbox SET head = TRUE FROM next_head
WHERE outbox.delivery_id = next_head.delivery_id AND NOT outbox.head;

-- name: list_deliveries
-- Deliveries, newest first, optionally of one tenant ($1), status ($2) and kind ($4); $3 limit.
SELECT delivery_id, tenant, kind, target_id, stream_key, run_id, sequence, url, body, final, status, attempts,
       next_attempt_at, last_error, created_at, updated_at FROM outbox
WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR status = $2) AND ($4::text IS NULL OR kind = $4)
ORDER BY delivery_id DESC LIMIT $3;

-- name: dead_letters
-- The dead deliveries of subscriber $2 of tenant $1, newest first, older than delivery $3 (NULL:
-- from the newest); at most $4. Read through the outbox_dead index.
SELECT delivery_id, tenant, kind, target_id, stream_key, run_id, sequence, url, body, final, status, attempts,
       next_attempt_at, last_error, created_at, updated_at FROM outbox
WHERE status = 'dead' AND target_id = $2 AND tenant = $1 AND ($3::text IS NULL OR delivery_id < $3)
ORDER BY delivery_id DESC LIMIT $4;

-- name: redeliver
-- Send a dead delivery ($1) again from the first attempt, now ($3); only within tenant $2 when given.
-- It heads its stream unless a pending row heads it already (then, being older, it is
-- promoted when that one is done).
UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = $3, updated_at = $3, claimed_by = NULL, claimed_until = NULL,
                  head = (SELECT true FROM outbox p WHERE p.stream_key = outbox.stream_key AND p.status = 'pending'
                          AND p.head AND p.delivery_id <> outbox.delivery_id LIMIT 1) IS NULL
WHERE delivery_id = $1 AND status = 'dead' AND ($2::text IS NULL OR tenant = $2);

-- name: claim_setting
-- Record setting $1 = $2 unless one is there already; the stored value either way.
WITH inserted AS (
    INSERT INTO host_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value
)
SELECT value FROM inserted UNION ALL SELECT value FROM host_settings WHERE name = $1 LIMIT 1;

-- name: settings_under
-- The settings whose names start with $1.
SELECT name, value FROM host_settings WHERE starts_with(name, $1) ORDER BY name;

-- commits in one statement, many at a time (_group_commit) --------------------------------

-- name: commit_group
-- Many commits in one statement (in its own implicit transaction: one round trip, one WAL
-- flush), for commits that enqueue no delivery; one commit per run. Each commit's writes
-- wait on its own guard, checked first: its fence (locked, as check_fence), its idempotency
-- key unclaimed, its messages not in the history yet, and nobody subscribed to its fan-outs
-- (no webhook of its tenants, no push config of its tasks: a commit that would enqueue goes
-- through the transaction). Then each run is created or compare-and-swapped; a terminal run
-- takes no commit (terminal states absorb, and readers rely on it). Rows are locked in run id
-- order, leases before runs, as every other writer does, so that batches of two hosts cannot
-- deadlock. Only a run's write can miss softly; the writes behind it refuse a duplicate by a
-- unique violation, which undoes the whole statement (a claim or a message that a concurrent
-- commit slipped in after the guard's snapshot): its commits are then written one by one.
-- Every guard looks its rows up by key, one probe per row (a scalar sub-select, or a lateral
-- one that locks): the planner cannot turn those into joins. asyncpg prepares this statement
-- once per connection and PostgreSQL keeps the generic plan it made then, while the tables were
-- empty, until they are analyzed; written as joins, that plan read the claims and the history
-- whole at every commit (3.3 ms a statement after 5,000 sends, most of the server's CPU).
-- Returns, per commit, whether its guard held and whether it was written.
-- Arrays, one element per commit: $1..$9 the run's columns (run_id, tenant, workflow_id, status,
-- last_sequence, state, created_at, updated_at, due_at), $10 expected_sequence (NULL: create),
-- $11 fence owner (NULL: none), $12 epoch. Then rows, each led by the run id of its commit:
-- claims $13..$21, events $22..$25, task records $26..$33, messages $34..$38, tenants whose
-- webhooks must be none $39, $40, tasks whose push configs must be none $41, $42.
WITH c AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bytea[], $7::text[],
                         $8::text[], $9::text[], $10::bigint[], $11::text[], $12::bigint[])
        AS c(run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at, expected,
             fence_owner, fence_epoch)
), claims AS (
    SELECT * FROM unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::int[],
                         $20::bytea[], $21::text[])
        AS k(owner, tenant, scope, key, request_digest, run_id, status_code, body, created_at)
), messages AS (
    SELECT * FROM unnest($34::text[], $35::text[], $36::text[], $37::bytea[], $38::text[])
        AS n(owner, task_id, message_id, message, created_at)
), fenced AS (
    SELECT l.run_id FROM (SELECT * FROM c WHERE c.fence_owner IS NOT NULL ORDER BY c.run_id) f
    CROSS JOIN LATERAL (
        SELECT l.run_id FROM run_leases l
        WHERE l.run_id = f.run_id AND l.owner = f.fence_owner AND l.epoch = f.fence_epoch AND l.expires_at >= now()
        FOR UPDATE
    ) l
), blocked AS (
    SELECT k.owner FROM claims k
    WHERE (SELECT true FROM idempotency i WHERE i.tenant = k.tenant AND i.scope = k.scope AND i.key = k.key)
    UNION ALL
    SELECT n.owner FROM messages n
    WHERE (SELECT true FROM a2a_messages m WHERE m.task_id = n.task_id AND m.message_id = n.message_id)
    UNION ALL
    SELECT q.owner FROM unnest($39::text[], $40::text[]) AS q(owner, tenant)
    WHERE (SELECT true FROM webhooks w WHERE w.tenant = q.tenant LIMIT 1)
    UNION ALL
    SELECT q.owner FROM unnest($41::text[], $42::text[]) AS q(owner, task_id)
    WHERE (SELECT true FROM push_configs p WHERE p.task_id = q.task_id LIMIT 1)
), ok AS (
    SELECT c.run_id FROM c
    WHERE (c.fence_owner IS NULL OR c.run_id IN (SELECT run_id FROM fenced))
      AND NOT EXISTS (SELECT 1 FROM blocked b WHERE b.owner = c.run_id)
), locked AS (
    SELECT r.run_id FROM runs r JOIN c ON c.run_id = r.run_id
    WHERE c.expected IS NOT NULL AND c.run_id IN (SELECT run_id FROM ok)
    ORDER BY r.run_id
    FOR UPDATE OF r
), created AS (
    INSERT INTO runs (run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at)
    SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM c
    WHERE c.expected IS NULL AND c.run_id IN (SELECT run_id FROM ok)
    ORDER BY c.run_id
    ON CONFLICT (run_id) DO NOTHING
    RETURNING run_id
), updated AS (
    UPDATE runs SET status = c.status, last_sequence = c.last_sequence, state = c.state, updated_at = c.updated_at,
                    due_at = c.due_at
    FROM c
    WHERE runs.run_id = c.run_id AND runs.last_sequence = c.expected
      AND runs.status NOT IN ('completed', 'failed', 'cancelled') AND c.run_id IN (SELECT run_id FROM locked)
    RETURNING runs.run_id
), written AS (
    SELECT run_id FROM created UNION ALL SELECT run_id FROM updated
), claimed AS (
    INSERT INTO idempotency (tenant, scope, key, request_digest, run_id, status_code, body, created_at)
    SELECT tenant, scope, key, request_digest, run_id, status_code, body, created_at FROM claims
    WHERE owner IN (SELECT run_id FROM written)
    ORDER BY tenant, scope, key
), events AS (
    INSERT INTO run_events (run_id, sequence, doc)
    SELECT e.run_id, e.sequence, e.doc FROM unnest($22::text[], $23::text[], $24::bigint[], $25::bytea[])
        AS e(owner, run_id, sequence, doc)
    WHERE e.owner IN (SELECT run_id FROM written)
), tasks AS (
    INSERT INTO a2a_tasks (task_id, tenant, principal, context_id, record, updated_at, state)
    SELECT t.task_id, t.tenant, t.principal, t.context_id, t.record, t.updated_at, t.state
    FROM unnest($26::text[], $27::text[], $28::text[], $29::text[], $30::text[], $31::bytea[], $32::text[], $33::text[])
        AS t(owner, task_id, tenant, principal, context_id, record, updated_at, state)
    WHERE t.owner IN (SELECT run_id FROM written)
    ORDER BY t.task_id
    ON CONFLICT (task_id) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at, state = excluded.state
), recorded AS (
    INSERT INTO a2a_messages (task_id, message_id, message, created_at)
    SELECT task_id, message_id, message, created_at FROM messages
    WHERE owner IN (SELECT run_id FROM written)
)
SELECT c.run_id, c.run_id IN (SELECT run_id FROM ok) AS guarded, c.run_id IN (SELECT run_id FROM written) AS written
FROM c;

-- name: current_tasks
-- For each task ($1) and the run sequence this host holds of it ($2; -1 for none): the run's
-- sequence now, and only where it differs, the task's record, run and history (one snapshot;
-- a task without its run, or a run without a task, is not found). Each row is looked up by
-- key (OFFSET 0 keeps the lateral sub-selects from being made joins), as commit_group's guards.
SELECT k.task_id, r.last_sequence, fresh.*
FROM unnest($1::text[], $2::bigint[]) AS k(task_id, known)
CROSS JOIN LATERAL (SELECT * FROM runs r WHERE r.run_id = k.task_id OFFSET 0) r
CROSS JOIN LATERAL (SELECT * FROM a2a_tasks t WHERE t.task_id = k.task_id OFFSET 0) t
LEFT JOIN LATERAL (
    SELECT r.tenant, r.workflow_id, r.status, r.state, r.created_at, r.updated_at, r.due_at,
           t.tenant AS task_tenant, t.principal, t.context_id, t.record, t.updated_at AS task_updated_at,
           t.state AS task_state,
           ARRAY(SELECT m.message FROM a2a_messages m WHERE m.task_id = k.task_id ORDER BY m.seq) AS history
    WHERE r.last_sequence <> k.known
) AS fresh ON TRUE;

-- name: purgeable_runs
-- Runs that ended before $1, oldest first, of tenant $2 (NULL: any tenant), with no delivery
-- still pending (a push or webhook in flight keeps its run) and no dead letter that died after
-- $1 (a dead letter stays readable as long as a run is kept after it ended); at most $3.
-- Locked, so that two hosts purging at once never take the same run (the other skips it).
SELECT r.run_id FROM runs r
WHERE r.status IN ('completed', 'failed', 'cancelled') AND r.updated_at < $1
  AND ($2::text IS NULL OR r.tenant = $2)
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.run_id = r.run_id AND o.status = 'pending')
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.run_id = r.run_id AND o.status = 'dead' AND o.updated_at >= $1)
ORDER BY r.updated_at LIMIT $3
FOR UPDATE OF r SKIP LOCKED;

-- name: purge_run_events
DELETE FROM run_events WHERE run_id = ANY($1::text[]);

-- name: purge_task_messages
DELETE FROM a2a_messages WHERE task_id = ANY($1::text[]);

-- name: purge_tasks
DELETE FROM a2a_tasks WHERE task_id = ANY($1::text[]);

-- name: purge_push_configs
DELETE FROM push_configs WHERE task_id = ANY($1::text[]);

-- name: purge_deliveries
DELETE FROM outbox WHERE run_id = ANY($1::text[]);

-- name: purge_idempotency
-- The claims that started or answered these runs: the same request, sent again, starts anew.
DELETE FROM idempotency WHERE run_id = ANY($1::text[]);

-- name: purge_leases
DELETE FROM run_leases WHERE run_id = ANY($1::text[]);

-- name: purge_runs
DELETE FROM runs WHERE run_id = ANY($1::text[]);

-- file bytes ---------------------------------------------------------------------------------

-- name: insert_blobs
-- Store a commit's file bytes ($1 digests, $2 sizes, $3 data; $4 created_at), once per content,
-- and link them to its run ($5). A blob stored already is locked, not rewritten (the update
-- leaves its bytes where they are): a purge deciding to delete it waits for this commit and
-- then sees its link (purge_blobs). Locked in digest order, as the purge locks them.
WITH stored AS (
    INSERT INTO blobs (digest, size, created_at, data)
    SELECT b.digest, b.size, $4::text, b.data FROM unnest($1::text[], $2::bigint[], $3::bytea[]) AS b(digest, size, data)
    ORDER BY b.digest
    ON CONFLICT (digest) DO UPDATE SET size = excluded.size
)
INSERT INTO run_blobs (run_id, digest)
SELECT $5::text, digest FROM unnest($1::text[]) AS digest
ON CONFLICT DO NOTHING;

-- name: read_blobs
-- The bytes of those of the blobs $2 (digests) that run $1 is linked to.
SELECT b.digest, b.data FROM run_blobs l JOIN blobs b ON b.digest = l.digest
WHERE l.run_id = $1 AND l.digest = ANY($2::text[]);

-- name: lock_purged_blobs
-- Before purge_blobs: lock the blobs the runs $1 are linked to, in digest order, so that a
-- commit linking one of them meanwhile either has committed (purge_blobs, a statement of its
-- own, then sees its link) or waits for the purge and stores the blob again.
SELECT b.digest FROM blobs b
WHERE b.digest IN (SELECT l.digest FROM run_blobs l WHERE l.run_id = ANY($1::text[]))
ORDER BY b.digest
FOR UPDATE OF b;

-- name: purge_blobs
-- The blobs the runs $1 are linked to that no other run is (before the links go).
DELETE FROM blobs b
WHERE b.digest IN (SELECT l.digest FROM run_blobs l WHERE l.run_id = ANY($1::text[]))
  AND NOT EXISTS (SELECT 1 FROM run_blobs o WHERE o.digest = b.digest AND o.run_id <> ALL($1::text[]));

-- name: purge_run_blobs
DELETE FROM run_blobs WHERE run_id = ANY($1::text[]);

-- the effect ledger ------------------------------------------------------------------------------

-- name: release_effect_claims
-- Before a new attempt of effect $1 is claimed: an attempt still claimed was never settled (its
-- host died between the send and the record), so it is released, its time kept. The rows it
-- touches stay locked until the claim commits, so two claims of one effect take turns.
UPDATE effects SET state = 'released' WHERE effect_id = $1 AND state = 'claimed';

-- name: claim_effect
-- The next attempt of an effect, claimed (see sqlite/queries.sql); a claim that lost a race for
-- the same number finds the primary key taken and is tried again.
INSERT INTO effects (effect_id, attempt, tenant, run_id, node_id, seam, keying, provider_key, invocation_id, state, at)
SELECT $1, COALESCE(MAX(attempt), 0) + 1, $2, $3, $4, $5, $6, $7, $8, 'claimed', $9
FROM effects WHERE effect_id = $1
ON CONFLICT DO NOTHING
RETURNING attempt;

-- name: settle_effect
UPDATE effects SET state = $3 WHERE effect_id = $1 AND attempt = $2 AND state = 'claimed';

-- name: list_effects
-- Run $1's ledger, oldest first (see sqlite/queries.sql).
SELECT effect_id, attempt, node_id, seam, keying, provider_key, invocation_id, state, at
FROM effects WHERE run_id = $1
UNION ALL
SELECT o.delivery_id, o.attempts,
       COALESCE((SELECT convert_from(e.doc, 'UTF8')::jsonb ->> 'nodeId' FROM run_events e
                 WHERE e.run_id = o.run_id AND e.sequence = o.sequence), 'tether:run'),
       CASE o.kind WHEN 'webhook' THEN 'openwop.webhook.delivery' WHEN 'a2a-push' THEN 'a2a.push.delivery'
                   ELSE 'openwop.callback.delivery' END,
       'business-identity', o.delivery_id, NULL,
       CASE o.status WHEN 'delivered' THEN 'completed' ELSE 'released' END, o.updated_at
FROM outbox o WHERE o.run_id = $1 AND o.attempts > 0
ORDER BY 9, 1, 2;

-- name: purge_effects
-- Ledger rows older than $1, oldest first, at most $2 (a purge batch, like purge_runs).
DELETE FROM effects WHERE (effect_id, attempt) IN (SELECT effect_id, attempt FROM effects WHERE at < $1 ORDER BY at LIMIT $2);
