"""A SQLite store's delivery claims live in its process: they hide a delivery being sent, and nothing longer.

PostgreSQL keeps claims in a column (``test_store_postgres``); a SQLite file serves one
host, so its claims are a copy in memory (``docs/caches.md``). A claim that outlived its
attempt would hide a due delivery, so: a claim lapses by the clock, and recording the
attempt ends it at once.
"""

from __future__ import annotations

from store_records import at, callback_fanout, create_run, wait_until

from tether.store.sqlite import SqliteStore


async def test_a_claim_hides_its_delivery_until_it_lapses_and_an_attempt_ends_it(sqlite_store: SqliteStore) -> None:
    store = sqlite_store
    await create_run(store, extras=[callback_fanout("r1")])
    [row] = await store.due_deliveries(at(1), 10, claim_seconds=0.2)
    assert await store.due_deliveries(at(1), 10) == [], "a claimed delivery is not handed out twice"
    next_at = await store.next_delivery_at()
    assert next_at is None or next_at > at(1), "nor is it due while claimed: the worker sleeps, it does not spin"

    async def handed_out_again() -> bool:
        due = await store.due_deliveries(at(1), 10, claim_seconds=30)
        return [d.delivery_id for d in due] == [row.delivery_id]

    await wait_until(handed_out_again, timeout=5, what="the lapsed claim to free its delivery")
    assert await store.due_deliveries(at(1), 10) == [], "claimed again, for 30 s"
    await store.record_attempt(
        row.delivery_id, status="pending", attempts=1, next_attempt_at=at(2), last_error="e", now=at(1)
    )
    assert [d.delivery_id for d in await store.due_deliveries(at(2), 10)] == [row.delivery_id], (
        "recording the attempt ends its claim: the retry is due when it is due, not when the claim lapses"
    )
