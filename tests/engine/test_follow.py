"""Followers of one run share their reads, and never a read from before their wake-up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from pg import migrated_database

from tether.engine.follow import RunLogs
from tether.engine.notifier import Notifier
from tether.store.base import Commit, EventRow, RunRow
from tether.store.postgres import PostgresStore
from tether.store.sqlite import SqliteStore

NOW = "2026-11-30T12:00:00.000Z"


class CountingStore(SqliteStore):
    """The real SQLite store, counting the event reads that reach it."""

    reads = 0
    #: when set, the next read waits for it: a read held in flight
    hold: asyncio.Event | None = None

    async def read_events(self, run_id: str, after: int = -1, limit: int = 1000) -> list[EventRow]:
        self.reads += 1
        hold, self.hold = self.hold, None
        if hold is not None:
            await hold.wait()
        return await super().read_events(run_id, after, limit)


def row(sequence: int, status: str = "running") -> RunRow:
    return RunRow("run_f", "acme", "wf", status, sequence, {"status": status}, NOW, NOW)


def event(sequence: int) -> EventRow:
    return EventRow("run_f", sequence, orjson.dumps({"sequence": sequence, "type": "test.event"}))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CountingStore]:
    async with CountingStore(tmp_path / "tether.db") as opened:
        await opened.commit(Commit(row(0), [event(0)], None))
        yield opened


async def wait_for(predicate, deadline: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(deadline):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_a_hundred_followers_woken_by_one_commit_make_one_read(store: CountingStore) -> None:
    notifier = Notifier()
    logs = RunLogs(store, notifier)
    seen: list[list[int]] = [[] for _ in range(100)]

    async def follow(into: list[int]) -> None:
        async for item in logs.follow("run_f", -1, keepalive=60).events():
            if item is not None:
                into.append(item.sequence)
                if item.sequence == 2:  # the last event: streams stop at the terminal one
                    return

    tasks = [asyncio.create_task(follow(into)) for into in seen]
    try:
        await wait_for(lambda: all(into == [0] for into in seen))
        before = store.reads
        await store.commit(Commit(row(2, "completed"), [event(1), event(2)], 0))
        notifier.publish("run_f")
        await wait_for(lambda: all(task.done() for task in tasks))
        assert all(into == [0, 1, 2] for into in seen), "every follower got every event once, in order"
        assert store.reads - before <= 3, f"{store.reads - before} reads for one commit seen by 100 followers"
    finally:
        for task in tasks:
            task.cancel()


async def test_a_read_begun_before_a_wake_up_is_not_shared_after_it(store: CountingStore) -> None:
    notifier = Notifier()
    logs = RunLogs(store, notifier)
    release = store.hold = asyncio.Event()
    early = asyncio.ensure_future(logs.after("run_f", 0))
    await asyncio.sleep(0)  # the early read is in flight, held, across the commit below
    await store.commit(Commit(row(1), [event(1)], 0))
    notifier.publish("run_f")
    late = await asyncio.wait_for(logs.after("run_f", 0), 5)
    assert [e.sequence for e in late] == [1], "a follower woken by the commit reads after it"
    release.set()
    await early
    assert store.reads == 2


async def test_one_follower_leaving_does_not_cancel_the_read_of_the_others(store: CountingStore) -> None:
    logs = RunLogs(store, Notifier())
    first = asyncio.ensure_future(logs.after("run_f", -1))
    second = asyncio.ensure_future(logs.after("run_f", -1))
    await asyncio.sleep(0)
    first.cancel()
    assert [e.sequence for e in await second] == [0]
    assert store.reads == 1


async def test_what_this_host_committed_to_a_followed_run_is_read_from_memory(store: CountingStore) -> None:
    notifier = Notifier()
    logs = RunLogs(store, notifier)
    with notifier.subscribe("run_f"):
        first = Commit(row(2), [event(1), event(2)], 0)
        await store.commit(first)
        logs.committed(first)
        assert [e.sequence for e in await logs.after("run_f", 0)] == [1, 2]
        assert [e.sequence for e in await logs.after("run_f", 1)] == [2]
        assert store.reads == 0, "the events were taken from the commit, not read back"
        assert [e.sequence for e in await logs.after("run_f", -1)] == [0, 1, 2], (
            "what memory lacks comes from the store"
        )
        assert await logs.after("run_f", 2) == [] and store.reads == 2, "past what memory holds, the store decides"
        elsewhere = Commit(row(4), [event(3), event(4)], 2)
        await store.commit(elsewhere)  # committed, say, by another host: never kept here
        last = Commit(row(5), [event(5)], 4)
        await store.commit(last)
        logs.committed(last)
        assert [e.sequence for e in await logs.after("run_f", 2)] == [3, 4, 5], (
            "a gap in memory sends the follower to the store"
        )
    unfollowed = Commit(row(6), [event(6)], 5)
    await store.commit(unfollowed)
    logs.committed(unfollowed)
    assert logs._recent == {}, "nothing is kept for a run no one follows"


async def test_another_hosts_commits_are_read_from_the_database_between_this_hosts_own() -> None:
    with migrated_database() as dsn:
        async with PostgresStore(dsn) as here, PostgresStore(dsn) as there:
            notifier = Notifier()
            logs = RunLogs(here, notifier)
            with notifier.subscribe("run_f"):
                for commit in (Commit(row(0), [event(0)], None), Commit(row(1), [event(1)], 0)):
                    await here.commit(commit)
                    logs.committed(commit)
                await there.commit(Commit(row(3), [event(2), event(3)], 1))  # this host is not told
                assert [e.sequence for e in await logs.after("run_f", 1)] == [2, 3], (
                    "what memory ends before is read from the database"
                )
                mine = Commit(row(4), [event(4)], 3)
                await here.commit(mine)
                logs.committed(mine)
                assert [e.sequence for e in await logs.after("run_f", 1)] == [2, 3, 4], (
                    "the other host's commits are a gap in memory: the database fills it, in order"
                )
                assert [e.sequence for e in await logs.after("run_f", 3)] == [4]


async def test_a_fanout_is_timed_once_when_the_last_stream_has_written_it_or_left(store: CountingStore) -> None:
    notifier = Notifier()
    timed: list[float] = []
    logs = RunLogs(store, notifier, on_fanout=timed.append)
    fast = logs.follow("run_f", -1, keepalive=60).pages()
    slow = logs.follow("run_f", -1, keepalive=60).pages()
    assert [e.sequence for e in await anext(fast)] == [0] and [e.sequence for e in await anext(slow)] == [0]
    commit = Commit(row(1), [event(1)], 0)
    await store.commit(commit)
    logs.committed(commit)
    notifier.publish("run_f")
    late = logs.follow("run_f", 0, keepalive=60).pages()  # joins after the commit: not waited for
    assert [e.sequence for e in await anext(late)] == [1]
    assert [e.sequence for e in await anext(fast)] == [1]
    pending = asyncio.ensure_future(anext(fast))  # asking for more: the page is written
    await wait_for(lambda: logs._fanouts["run_f"].pending[0].waiting == 1)  # the fast stream counted itself
    assert timed == [], "the slow stream has not written the commit yet"
    await slow.aclose()  # it leaves instead: the fan-out is over
    assert len(timed) == 1 and timed[0] >= 0
    pending.cancel()
    await asyncio.gather(pending, return_exceptions=True)
    await fast.aclose()
    await late.aclose()
    assert logs._fanouts == {}, "nothing is kept for a run no stream follows"
