-- Due deliveries through an index of stream heads (the same as sqlite/migrations/0007_*.sql).
--
-- The worker used to find due deliveries by scanning every due pending row and asking, for
-- each, whether an older pending row of its stream was left (a correlated NOT EXISTS); its
-- cost grew with the backlog, and the rows queued behind a head that was backing off were
-- scanned again on every pass. Now each pending row says whether it heads its stream, and the
-- worker reads due heads from one partial index, in due order. The statements that write the
-- outbox keep the flag (queries.sql: insert_deliveries, record_attempts, promote_heads,
-- redeliver); due_deliveries still checks the order itself, so a stale flag can only delay.
ALTER TABLE outbox ADD COLUMN head BOOLEAN NOT NULL DEFAULT TRUE;
UPDATE outbox SET head = FALSE
WHERE status = 'pending'
  AND EXISTS (SELECT 1 FROM outbox p WHERE p.status = 'pending' AND p.stream_key = outbox.stream_key
              AND (p.sequence, p.delivery_id) < (outbox.sequence, outbox.delivery_id));
DROP INDEX outbox_pending;
-- The worker reads due stream heads, by due time.
CREATE INDEX outbox_due ON outbox (next_attempt_at, delivery_id) WHERE status = 'pending' AND head;
-- next_delivery_at finds when another host's claim lapses without reading every head.
CREATE INDEX outbox_claimed ON outbox (claimed_until) WHERE claimed_until IS NOT NULL;
