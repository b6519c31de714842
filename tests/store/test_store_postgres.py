"""What only the shared PostgreSQL store does: leases, fencing, claims and hints between hosts.

Several ``PostgresStore`` objects on one database stand in for several hosts.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from pg import fresh_database
from store_records import (
    NOW,
    TENANT,
    advance,
    at,
    callback_fanout,
    claim,
    create_run,
    event,
    push_config,
    push_fanout,
    run_row,
    wait_until,
)

from tether.errors import StoreUnavailable
from tether.ids import new_id
from tether.store.base import Commit, Extra, LeaseLost, RunRow, TaskMessage, TaskRecord
from tether.store.postgres import PostgresStore
from tether.store.postgres._driver import Q
from tether.store.postgres._listen import Listener, Notifier
from tether.store.postgres._migrate import migration_files

pytestmark = pytest.mark.timeout(60)

Hosts = Callable[[], Awaitable[PostgresStore]]
FAR_FUTURE = "9999-12-31T23:59:59.999Z"


async def test_it_is_a_shared_store(postgres_store: PostgresStore) -> None:
    assert postgres_store.shared is True


async def test_an_unreachable_server_is_store_unavailable() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/nowhere")
    with pytest.raises(StoreUnavailable) as unavailable:
        await store.open()
    assert isinstance(unavailable.value.__cause__, OSError)
    await store.close()


async def test_hosts_starting_together_apply_each_migration_once() -> None:
    with fresh_database() as dsn:
        stores = [PostgresStore(dsn, min_size=1, max_size=2) for _ in range(4)]
        await asyncio.gather(*(s.open() for s in stores))
        try:
            conn = await asyncpg.connect(dsn)
            try:
                versions = [r[0] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")]
            finally:
                await conn.close()
            assert versions == [version for version, _ in migration_files()]
        finally:
            for store in stores:
                await store.close()


# leases and fencing ---------------------------------------------------------------------


async def test_claim_run_refuses_a_second_host_until_the_lease_lapses(postgres_stores: Hosts) -> None:
    a, b = await postgres_stores(), await postgres_stores()
    run_id = new_id("run_")
    assert await a.claim_run(run_id, "host-a", 0.3) == 1
    assert await a.claim_run(run_id, "host-a", 0.3) == 1  # keeping it keeps the epoch
    assert await b.claim_run(run_id, "host-b", 30) is None
    epochs: list[int | None] = []

    async def b_takes_over() -> bool:
        epochs.append(await b.claim_run(run_id, "host-b", 30))
        return epochs[-1] is not None

    await wait_until(b_takes_over, timeout=5, what="the lapsed lease to be taken over")
    assert epochs[-1] == 2
    assert await a.claim_run(run_id, "host-a", 30) is None


async def test_a_commit_under_a_lost_lease_is_refused_and_writes_nothing(postgres_stores: Hosts) -> None:
    a, b = await postgres_stores(), await postgres_stores()
    await a.put_push_config(push_config("task_1", "p1"))
    run = await create_run(a)
    assert await a.claim_run(run.run_id, "host-a", 0.2) == 1
    run, _ = await advance(a, run, fence=("host-a", 1))  # a live lease lets the write through
    await wait_until(lambda: b.claim_run(run.run_id, "host-b", 30), timeout=5, what="host-b to take the lease")

    for stale in [("host-a", 1), ("host-b", 1), ("host-a", 2)]:
        with pytest.raises(LeaseLost):
            await a.commit(_fenced_commit(run, stale))
    stored = await a.get_run(run.run_id)
    assert stored is not None and stored.last_sequence == 1
    assert [e.sequence for e in await a.read_events(run.run_id)] == [0, 1]
    assert await a.get_idempotency(TENANT, "runs.create", "fenced") is None
    assert await a.get_task("task_1") is None
    assert await a.list_deliveries(None, None) == []

    moved, enqueued = await advance(b, run, fence=("host-b", 2), extras=[push_fanout(run.run_id, "task_1", sequence=2)])
    assert (moved.last_sequence, enqueued) == (2, 1)


async def test_an_expired_lease_fences_its_own_holder(postgres_store: PostgresStore) -> None:
    run = await create_run(postgres_store)
    assert await postgres_store.claim_run(run.run_id, "host-a", 0.1) == 1
    await asyncio.sleep(0.25)
    with pytest.raises(LeaseLost):
        await advance(postgres_store, run, fence=("host-a", 1))
    assert await postgres_store.claim_run(run.run_id, "host-a", 30) == 1  # nobody else took it: same epoch
    await advance(postgres_store, run, fence=("host-a", 1))


async def test_renew_leases_extends_only_the_live_leases_of_the_owner(postgres_store: PostgresStore) -> None:
    short, long, theirs = "run_1", "run_2", "run_3"
    await postgres_store.claim_run(short, "host-a", 0.2)
    await postgres_store.claim_run(long, "host-a", 30)
    await postgres_store.claim_run(theirs, "host-b", 30)
    assert await postgres_store.renew_leases("host-a", 30) == [short, long]
    await postgres_store.claim_run(short, "host-a", 0.1)
    await asyncio.sleep(0.25)
    assert await postgres_store.renew_leases("host-a", 30) == [long]
    assert await postgres_store.renew_leases("host-c", 30) == []
    assert await postgres_store.claim_run(short, "host-b", 30) == 2
    assert await postgres_store.claim_run(long, "host-b", 30) is None


async def test_a_released_lease_goes_to_the_next_host_with_a_higher_epoch(postgres_store: PostgresStore) -> None:
    assert await postgres_store.claim_run("run_1", "host-a", 30) == 1
    await postgres_store.release_run("run_1", "host-b")  # not theirs to release
    assert await postgres_store.claim_run("run_1", "host-b", 30) is None
    await postgres_store.release_run("run_1", "host-a")
    assert await postgres_store.renew_leases("host-a", 30) == []
    assert await postgres_store.claim_run("run_1", "host-b", 30) == 2


async def test_orphaned_runs_are_the_ones_that_need_a_host_and_have_none(postgres_store: PostgresStore) -> None:
    store = postgres_store
    orphans = [
        await create_run(store, status="pending"),
        await create_run(store, status="running"),
        await create_run(store, status="cancelling"),
        await create_run(store, status="waiting-approval", due_at=at(-1)),
        await create_run(store, status="waiting-input", due_at=at(0)),
    ]
    leased = await create_run(store, status="running")
    await store.claim_run(leased.run_id, "host-a", 30)
    lapsed = await create_run(store, status="running")
    await store.claim_run(lapsed.run_id, "host-a", 0.1)
    leased_gate = await create_run(store, status="waiting-external", due_at=at(-5))
    await store.claim_run(leased_gate.run_id, "host-a", 30)
    await create_run(store, status="waiting-approval", due_at=at(60))  # its deadline is still ahead
    await create_run(store, status="waiting-input")  # waits for a person, no deadline
    await create_run(store, status="completed", due_at=at(-5))
    await asyncio.sleep(0.25)

    expected = sorted([r.run_id for r in orphans] + [lapsed.run_id])
    assert await store.orphaned_runs(NOW, 100) == expected
    assert await store.orphaned_runs(NOW, 3) == expected[:3]


# delivery claims --------------------------------------------------------------------------


async def test_two_hosts_claiming_at_once_get_disjoint_deliveries(postgres_stores: Hosts) -> None:
    a, b = await postgres_stores(), await postgres_stores()
    for _ in range(40):  # forty independent streams
        run_id = new_id("run_")
        await create_run(a, run_id, extras=[callback_fanout(run_id)])
    taken: dict[str, list[str]] = {"host-a": [], "host-b": []}
    for _ in range(5):
        got_a, got_b = await asyncio.gather(
            a.due_deliveries(at(1), 6, owner="host-a", claim_seconds=30),
            b.due_deliveries(at(1), 6, owner="host-b", claim_seconds=30),
        )
        taken["host-a"] += [d.delivery_id for d in got_a]
        taken["host-b"] += [d.delivery_id for d in got_b]
    everything = taken["host-a"] + taken["host-b"]
    assert len(everything) == len(set(everything)) == 40


async def test_a_delivery_another_host_is_claiming_is_skipped_not_waited_for(
    postgres_store: PostgresStore, postgres_dsn: str
) -> None:
    for run_id in ("r1", "r2"):
        await create_run(postgres_store, extras=[callback_fanout(run_id)])
    other_host = await asyncpg.connect(postgres_dsn)
    try:
        async with other_host.transaction():  # another host, mid-claim, holds the row lock of r1's delivery
            await other_host.execute("SELECT 1 FROM outbox WHERE run_id = 'r1' FOR UPDATE")
            got = await asyncio.wait_for(postgres_store.due_deliveries(at(1), 10, owner="host-a"), 2)
            assert [d.run_id for d in got] == ["r2"]
    finally:
        await other_host.close()
    assert [d.run_id for d in await postgres_store.due_deliveries(at(1), 10, owner="host-a")] == ["r1"]


async def test_only_one_host_gets_a_stream_head_and_nobody_the_row_behind_it(postgres_stores: Hosts) -> None:
    a, b = await postgres_stores(), await postgres_stores()
    await a.put_push_config(push_config("task_1", "p1"))
    run = await create_run(a, extras=[push_fanout("r", "task_1")])
    await advance(a, run, extras=[push_fanout("r", "task_1", sequence=1)])
    got_a, got_b = await asyncio.gather(
        a.due_deliveries(at(1), 10, owner="host-a"), b.due_deliveries(at(1), 10, owner="host-b")
    )
    assert [d.sequence for d in got_a + got_b] == [0]


async def test_a_claim_lapses_and_an_attempt_ends_it(postgres_stores: Hosts) -> None:
    a, b = await postgres_stores(), await postgres_stores()
    await create_run(a, extras=[callback_fanout("r1")])
    [row] = await a.due_deliveries(at(1), 10, owner="host-a", claim_seconds=0.2)
    assert await b.due_deliveries(at(1), 10, owner="host-b") == []
    next_at = await b.next_delivery_at()
    assert next_at is not None and next_at > at(1)  # not due while claimed: the worker sleeps, it does not spin

    async def b_gets_it() -> bool:
        return [d.delivery_id for d in await b.due_deliveries(at(1), 10, owner="host-b", claim_seconds=30)] == [
            row.delivery_id
        ]

    await wait_until(b_gets_it, timeout=5, what="the lapsed claim to be taken over")
    await b.record_attempt(
        row.delivery_id, status="pending", attempts=1, next_attempt_at=at(2), last_error="e", now=at(1)
    )
    assert [d.delivery_id for d in await a.due_deliveries(at(2), 10, owner="host-a")] == [row.delivery_id]


# hints between hosts ------------------------------------------------------------------------


async def test_an_announcement_reaches_the_other_hosts_and_not_its_sender(postgres_stores: Hosts) -> None:
    a, b = await postgres_stores(), await postgres_stores()
    heard_by_a: list[str] = []
    heard_by_b: list[str] = []
    a.on_announce(heard_by_a.append)
    b.on_announce(heard_by_b.append)

    await _announce_until_heard(a, "run_from_a", heard_by_b)
    await _announce_until_heard(b, "run_from_b", heard_by_a)
    # both listen now; NOTIFY delivers in commit order, so A's own hint would beat B's marker
    await a.announce("run_from_a_again")
    await _announce_until_heard(b, "run_marker", heard_by_a)
    assert set(heard_by_a) == {"run_from_b", "run_marker"}
    assert set(heard_by_b) == {"run_from_a", "run_from_a_again"}


async def test_the_listener_and_the_notifier_reconnect_when_their_connections_drop(
    postgres_stores: Hosts, postgres_dsn: str
) -> None:
    a, b = await postgres_stores(), await postgres_stores()
    heard: list[str] = []
    missed: list[str] = []
    b.on_hints_missed(lambda: missed.append("missed"))  # told at each (re)start of listening
    b.on_announce(heard.append)
    await _announce_until_heard(a, "run_before", heard)
    assert missed == ["missed"]

    admin = await asyncpg.connect(postgres_dsn)
    try:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name IN ('tether-listener', 'tether-notifier')"
        )
    finally:
        await admin.close()
    assert killed == 2
    await _announce_until_heard(a, "run_after", heard, timeout=15)
    assert missed == ["missed", "missed"], "hints sent while the listener was away may be lost: it says so"


async def test_the_listener_keeps_its_connection_checked(postgres_dsn: str) -> None:
    listener = Listener(postgres_dsn, "listener-origin", keepalive=0.05)
    notifier = Notifier(postgres_dsn, "notifier-origin")
    heard: list[str] = []
    listener.add(heard.append)
    listener.start()
    try:
        await asyncio.wait_for(listener.listening.wait(), 5)
        await asyncio.sleep(0.3)  # several keepalive rounds
        assert listener.listening.is_set()
        assert await notifier.send("run_1") is True
        await wait_until(lambda: heard == ["run_1"], what="the hint after the keepalives")
    finally:
        await listener.close()
        await notifier.close()
    assert not listener.listening.is_set()


async def _announce_until_heard(sender: PostgresStore, run_id: str, heard: list[str], *, timeout: float = 5) -> None:
    async def heard_yet() -> bool:
        if run_id not in heard:
            await sender.announce(run_id)
            await asyncio.sleep(0.05)
        return run_id in heard

    await wait_until(heard_yet, timeout=timeout, what=f"{run_id} to be heard")


def _fenced_commit(run: RunRow, fence: tuple[str, int]) -> Commit:
    """A full transition of ``run`` (key claim, task, message, delivery) made under ``fence``."""
    moved = run_row(run.run_id, status="completed", last_sequence=run.last_sequence + 1)
    extras: list[Extra] = [
        TaskRecord("task_1", TENANT, "key:alice", "ctx", {"state": "completed"}, NOW),
        TaskMessage("task_1", "m1", {"text": "done"}, NOW),
        push_fanout(run.run_id, "task_1", sequence=moved.last_sequence),
    ]
    return Commit(
        moved, [event(run.run_id, moved.last_sequence)], run.last_sequence, claim("fenced", run.run_id), extras, fence
    )


def _table_scans(plan: dict[str, Any]) -> list[str]:
    """The tables a plan reads whole (``Seq Scan``), anywhere in its tree."""
    found = [str(plan["Relation Name"])] if plan.get("Node Type") == "Seq Scan" else []
    for child in plan.get("Plans", []):
        found += _table_scans(child)
    return found


#: statements whose generic plan may read a table whole: start-up, operator listings, the purge's
#: batches, and the attempts, which are planned per batch instead (record_attempts)
READ_WHOLE = {
    "active_runs",
    "release_claims",
    "list_keys",
    "list_credentials",
    "list_workflows",
    "list_deliveries",
    "lock_attempt_runs",
    "record_attempts",
    "purge_runs",
    "purge_deliveries",
    "purge_push_configs",
    "lock_purged_blobs",
    "purge_blobs",
    "purge_effects",
    "settings_under",  # host_settings: a handful of rows (the host key's fingerprint, the signing keys)
}
_DML = re.compile(r"^\s*(WITH|SELECT|INSERT|UPDATE|DELETE)\b", re.IGNORECASE | re.MULTILINE)


async def test_only_the_listed_statements_read_a_table_whole_when_planned_on_tables_never_analyzed(
    postgres_store: PostgresStore, postgres_dsn: str
) -> None:
    # asyncpg prepares a statement once per connection, and PostgreSQL keeps the generic plan it
    # made then, while the tables were empty, until they are next analyzed: a plan that reads a
    # table whole was fine at start, and a minute later commit_group scanned every idempotency
    # claim and history message per commit (3.3 ms a statement after 5,000 sends)
    conn = await asyncpg.connect(postgres_dsn)
    planned: set[str] = set()
    scanning: dict[str, list[str]] = {}
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL") == 0
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        for name, statement in Q.items():
            if not _DML.search(statement):
                continue
            parameters = len((await conn.prepare(statement)).get_parameters())
            await conn.execute(f"PREPARE planned AS {statement}")
            values = f"({', '.join(['NULL'] * parameters)})" if parameters else ""
            plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE planned{values}")
            await conn.execute("DEALLOCATE planned")
            planned.add(name)
            if scans := _table_scans(json.loads(plan)[0]["Plan"]):
                scanning[name] = scans
    finally:
        await conn.close()
    assert {"commit_group", "current_tasks", "insert_deliveries", "due_deliveries"} <= planned
    assert set(scanning) == READ_WHOLE, scanning


@pytest.mark.parametrize("statement", ["claim_run", "release_run"])
async def test_lease_bookkeeping_commits_unflushed_and_leaves_the_session_synchronous(
    postgres_store: PostgresStore, postgres_dsn: str, statement: str
) -> None:
    # a lease is relied on only through check_fence, inside a synchronous write; its own commit
    # need not wait for the WAL flush. The setting must end with the statement's transaction:
    # a session left asynchronous would acknowledge the host's real writes before they are durable
    conn = await asyncpg.connect(postgres_dsn)
    arguments = ("run-lease", "host-a", 30.0) if statement == "claim_run" else ("run-lease", "host-a")
    try:
        await postgres_store.claim_run("run-lease", "host-a", 30.0)  # a lease to release (and to keep)
        async with conn.transaction():
            await conn.execute(Q[statement], *arguments)
            assert await conn.fetchval("SHOW synchronous_commit") == "off"
        await postgres_store.claim_run("run-lease", "host-a", 30.0)
        await conn.execute(Q[statement], *arguments)
        assert await conn.fetchval("SHOW synchronous_commit") == "on"
    finally:
        await conn.close()


async def test_recording_attempts_commits_unflushed_and_leaves_the_session_synchronous(postgres_dsn: str) -> None:
    # a receipt is unrecorded until its write's commit returns, and a crash of the host meanwhile
    # sends it again; a lost commit (the database server's crash) only sends it again too, so the
    # commit need not wait for the WAL flush. The settings must end with the transaction: a session
    # left asynchronous would acknowledge the host's real writes before they are durable
    conn = await asyncpg.connect(postgres_dsn)
    try:
        async with conn.transaction():
            await conn.execute(Q["attempts_settings"])
            assert await conn.fetchval("SHOW synchronous_commit") == "off"
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
        assert await conn.fetchval("SHOW synchronous_commit") == "on"
        assert await conn.fetchval("SHOW plan_cache_mode") == "auto"
    finally:
        await conn.close()
