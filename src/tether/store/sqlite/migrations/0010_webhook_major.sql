-- OpenWOP v2 webhooks (the same as postgres/migrations/0010_*.sql).
--
-- A webhook remembers the OpenWOP major it was registered under: its deliveries are rendered
-- (body, headers, event names) and retried (that major's advertised retry policy) in that
-- major's terms. Subscriptions made before are major 1's.
ALTER TABLE webhooks ADD COLUMN major INTEGER NOT NULL DEFAULT 1;
-- The dead letters of one subscription, newest first: what GET /webhooks/{id}/dead-letters reads.
CREATE INDEX outbox_dead ON outbox (target_id, delivery_id) WHERE status = 'dead';
