"""The effect ledger on both stores: attempts claimed by number, settled once, listed with the run's deliveries."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import orjson
import pytest
from store_records import TENANT, at, callback_fanout, create_run, run_row

from tether import clock
from tether.engine.retention import Retention
from tether.store.base import Commit, EffectClaim, EffectRecord, EventRow, Store

pytestmark = pytest.mark.timeout(60)


def claim(run_id: str, effect_id: str = "eff_0123456789abcdef", *, when: float = 1.0) -> EffectClaim:
    return EffectClaim(
        effect_id,
        TENANT,
        run_id,
        "peer",
        "a2a.handoff.send",
        "activity-recipe",
        "tether-key-0123456789abcdef",
        at(when),
    )


async def test_attempts_are_numbered_and_an_unsettled_one_is_released_by_the_next(store: Store) -> None:
    run = await create_run(store)
    assert await store.claim_effect(claim(run.run_id)) == 1  # its host "dies" here: never settled
    assert await store.claim_effect(claim(run.run_id, when=2.0)) == 2
    await store.settle_effect("eff_0123456789abcdef", 2, "completed")
    await store.settle_effect("eff_0123456789abcdef", 1, "completed")  # released stays released
    rows = await store.list_effects(run.run_id)
    assert [(r.attempt, r.state, r.at) for r in rows] == [(1, "released", at(1)), (2, "completed", at(2))]
    assert {(r.effect_id, r.node_id, r.seam, r.keying, r.provider_key) for r in rows} == {
        ("eff_0123456789abcdef", "peer", "a2a.handoff.send", "activity-recipe", "tether-key-0123456789abcdef")
    }
    assert await store.list_effects("run_other") == []


async def test_concurrent_claims_of_one_effect_take_distinct_numbers(store: Store) -> None:
    run = await create_run(store)
    numbers = await asyncio.gather(*(store.claim_effect(claim(run.run_id)) for _ in range(5)))
    assert sorted(numbers) == [1, 2, 3, 4, 5]
    states = [r.state for r in await store.list_effects(run.run_id)]
    assert states.count("claimed") >= 1 and set(states) <= {"claimed", "released"}


async def test_an_attempted_delivery_reads_as_an_effect_of_the_node_that_caused_it(store: Store) -> None:
    doc = orjson.dumps({"runId": "run_cb", "sequence": 0, "type": "node.completed", "nodeId": "notify"})
    row = run_row("run_cb")
    await store.commit(Commit(row, [EventRow("run_cb", 0, doc)], None, extras=[callback_fanout("run_cb")]))
    assert await store.list_effects("run_cb") == [], "never attempted: no effect yet"
    [due] = [d for d in await store.due_deliveries(at(1), 10) if d.run_id == "run_cb"]
    await store.record_attempt(
        due.delivery_id, status="pending", attempts=1, next_attempt_at=at(5), last_error="x", now=at(1)
    )
    [retrying] = await store.list_effects("run_cb")
    assert (retrying.attempt, retrying.state) == (1, "released")
    await store.record_attempt(
        due.delivery_id, status="delivered", attempts=2, next_attempt_at=at(6), last_error=None, now=at(6)
    )
    assert await store.list_effects("run_cb") == [
        EffectRecord(
            due.delivery_id,
            2,
            "notify",
            "openwop.callback.delivery",
            "business-identity",
            due.delivery_id,
            None,
            "completed",
            at(6),
        )
    ]


async def test_old_ledger_rows_are_purged_in_batches(store: Store) -> None:
    run = await create_run(store)
    for n in range(3):
        await store.claim_effect(claim(run.run_id, f"eff_old{n:013d}", when=n))
    await store.claim_effect(claim(run.run_id, "eff_new0000000000000", when=100))
    assert await store.purge_effects(at(50), 2) == 2
    assert await store.purge_effects(at(50), 2) == 1
    assert [r.effect_id for r in await store.list_effects(run.run_id)] == ["eff_new0000000000000"]


async def test_retention_keeps_ledger_rows_two_weeks_even_when_runs_go_sooner(store: Store) -> None:
    run = await create_run(store)
    now = clock.now()
    for ident, days in (("eff_fifteen_days_ago", 15), ("eff_thirteen_days_ago", 13)):
        when = clock.iso(now - timedelta(days=days))
        await store.claim_effect(replace(claim(run.run_id, ident), at=when))
    await Retention(store, window=1.0).purge_once()  # runs go after a second; the ledger stays 14 days
    assert [r.effect_id for r in await store.list_effects(run.run_id)] == ["eff_thirteen_days_ago"]
