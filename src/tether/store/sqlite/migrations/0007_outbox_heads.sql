-- Due deliveries through an index of stream heads (the same as postgres/migrations/0007_*.sql).
--
-- The worker used to find due deliveries by scanning every due pending row and asking, for
-- each, whether an older pending row of its stream was left (a correlated NOT EXISTS); its
-- cost grew with the backlog, and the rows queued behind a head that was backing off were
-- scanned again on every pass. Now each pending row says whether it heads its stream, and the
-- worker reads due heads from one partial index, in due order. The statements that write the
-- outbox keep the flag (queries.sql: enqueued_behind, promote_heads, redelivered_head; one
-- writer, so nothing races them).
ALTER TABLE outbox ADD COLUMN head INTEGER NOT NULL DEFAULT 1;
UPDATE outbox SET head = 0
WHERE status = 'pending'
  AND EXISTS (SELECT 1 FROM outbox p WHERE p.status = 'pending' AND p.stream_key = outbox.stream_key
              AND (p.sequence < outbox.sequence OR (p.sequence = outbox.sequence AND p.delivery_id < outbox.delivery_id)));
DROP INDEX outbox_pending;
-- The worker reads due stream heads, by due time.
CREATE INDEX outbox_due ON outbox (next_attempt_at, delivery_id) WHERE status = 'pending' AND head = 1;
