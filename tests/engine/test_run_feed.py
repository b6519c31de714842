"""The run feed: a bounded ring of run changes that watchers follow, resume, sync on and fall off.

Driven with commits and hints as the engine hands them over, over the real SQLite store
(which a hinted run is read from).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from pathlib import Path

import orjson
import pytest

from tether.engine.run_feed import FeedItem, RunFeed
from tether.store.base import Commit, EventRow, RunRow
from tether.store.sqlite import SqliteStore

NOW = "2026-12-06T09:00:00.000Z"


def row(run_id: str, sequence: int, status: str = "running", tenant: str = "acme") -> RunRow:
    return RunRow(run_id, tenant, "wf", status, sequence, {"status": status}, NOW, NOW)


def commit(run: RunRow, first: int | None = None) -> Commit:
    start = run.last_sequence if first is None else first
    events = [EventRow(run.run_id, s, b"{}") for s in range(start, run.last_sequence + 1)]
    return Commit(run, events, None)


def render(run: RunRow) -> bytes:
    return orjson.dumps({"runId": run.run_id, "status": run.status, "lastSequence": run.last_sequence})


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "tether.db") as opened:
        yield opened


async def take(items: AsyncGenerator[FeedItem | None, None], n: int) -> list[FeedItem | None]:
    return [await asyncio.wait_for(anext(items), 5) for _ in range(n)]


def runs(items: list[FeedItem | None]) -> list[tuple[str, str]]:
    shown = [orjson.loads(i.summary) for i in items if i is not None and i.kind == "run" and i.summary]
    return [(s["runId"], s["status"]) for s in shown]


async def test_a_watcher_sees_its_tenants_changes_and_not_a_commit_that_changes_nothing(store: SqliteStore) -> None:
    feed = RunFeed(store, render)
    async with aclosing(feed.watch("acme", None, keepalive=60)) as items:
        [sync] = await take(items, 1)
        assert sync is not None and (sync.kind, sync.reason) == ("sync", "start")
        feed.committed(commit(row("run_a", 0, "pending")))
        feed.committed(commit(row("run_b", 0, "pending", tenant="other")))
        feed.committed(commit(row("run_a", 1, "running")))
        feed.committed(commit(row("run_a", 2, "running")))  # the next commit, the same status: not a change
        feed.committed(commit(row("run_a", 4, "running"), first=4))  # a commit missed between: passed on
        feed.committed(commit(row("run_a", 3, "running")))  # older than what the ring has: dropped
        feed.committed(commit(row("run_a", 5, "completed")))
        got = await take(items, 4)
    assert runs(got) == [("run_a", "pending"), ("run_a", "running"), ("run_a", "running"), ("run_a", "completed")]
    assert [orjson.loads(i.summary or b"")["lastSequence"] for i in got if i] == [0, 1, 4, 5]


async def test_a_cursor_in_the_ring_resumes_exactly_and_one_past_it_syncs(store: SqliteStore) -> None:
    feed = RunFeed(store, render, capacity=4)
    async with aclosing(feed.watch("acme", None, keepalive=60)) as items:
        await take(items, 1)
        feed.committed(commit(row("run_a", 0, "pending")))
        [first] = await take(items, 1)
    assert first is not None and first.cursor is not None
    feed.committed(commit(row("run_a", 1, "running")))  # while nobody watches: still kept
    async with aclosing(feed.watch("acme", first.cursor, keepalive=60)) as items:
        assert runs(await take(items, 1)) == [("run_a", "running")]
    for n in range(2, 7):  # the ring (4) moves past ``first``
        feed.committed(commit(row("run_a", n, "waiting-approval" if n % 2 else "running")))
    async with aclosing(feed.watch("acme", first.cursor, keepalive=60)) as items:
        [sync] = await take(items, 1)
    assert sync is not None and (sync.kind, sync.reason) == ("sync", "gap")
    other_host = RunFeed(store, render)
    async with aclosing(other_host.watch("acme", first.cursor, keepalive=60)) as items:
        [sync] = await take(items, 1)
    assert sync is not None and (sync.kind, sync.reason) == ("sync", "gap"), "another feed's cursor"


async def test_a_watcher_that_falls_a_ring_behind_is_ended_as_lagging(store: SqliteStore) -> None:
    feed = RunFeed(store, render, capacity=8)
    async with aclosing(feed.watch("acme", None, keepalive=60)) as items:
        await take(items, 1)
        for n in range(20):  # the watcher reads nothing meanwhile
            feed.committed(commit(row(f"run_{n}", 0, "pending")))
        [end] = await take(items, 1)
        assert end is not None and (end.kind, end.reason, end.cursor) == ("end", "lagging", None)
        with pytest.raises(StopAsyncIteration):
            await anext(items)
    assert feed.watchers == 0


async def test_missed_hints_make_every_watcher_sync_and_a_hinted_run_is_read(store: SqliteStore) -> None:
    feed = RunFeed(store, render)
    await store.commit(commit(row("run_h", 0, "waiting-approval")))  # as another host would
    async with aclosing(feed.watch("acme", None, keepalive=60)) as items:
        await take(items, 1)
        feed.missed()
        feed.missed()  # a gap in a row is one gap
        feed.hinted("run_h")
        got = await take(items, 2)
    assert got[0] is not None and (got[0].kind, got[0].reason) == ("sync", "gap")
    assert runs(got[1:]) == [("run_h", "waiting-approval")]


@pytest.mark.parametrize("late", ["commit", "hint"])
async def test_changes_nobody_could_resume_for_are_not_kept_and_resuming_past_them_syncs(
    store: SqliteStore, late: str
) -> None:
    feed = RunFeed(store, render)
    async with aclosing(feed.watch("acme", None, keepalive=60)) as items:
        await take(items, 1)
        feed.committed(commit(row("run_a", 0, "pending")))
        [seen] = await take(items, 1)
    assert seen is not None and seen.cursor is not None
    feed._watched_until = 0  # the resume window after the last watcher has closed
    if late == "commit":
        feed.committed(commit(row("run_a", 1, "running")))
    else:
        feed.hinted("run_elsewhere")
    async with aclosing(feed.watch("acme", seen.cursor, keepalive=60)) as items:
        [sync] = await take(items, 1)
    assert sync is not None and (sync.kind, sync.reason) == ("sync", "gap")


async def test_an_idle_watch_gets_keepalives_and_ends_when_the_host_stops(store: SqliteStore) -> None:
    feed = RunFeed(store, render)
    async with aclosing(feed.watch("acme", None, keepalive=0.05)) as items:
        got = await take(items, 3)
        assert got[1:] == [None, None]
        feed.stop()
        [end] = await take(items, 1)
    assert end is not None and (end.kind, end.reason) == ("end", "shutdown")
