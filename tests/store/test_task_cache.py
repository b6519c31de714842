"""SQLite keeps recent tasks in memory: what it answers from there is what the disk says.

Each test compares the store that wrote (and answers from memory) with a store opened
afresh on the same file, which has never seen a commit and reads the disk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_records import NOW, TENANT, advance, create_run, run_row

from tether.errors import Conflict
from tether.store._task_cache import TaskCache, TaskEntry
from tether.store.base import Commit, TaskMessage, TaskRecord
from tether.store.sqlite import SqliteStore


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "tether.db") as store:
        yield store


def record(task_id: str, state: str) -> TaskRecord:
    return TaskRecord(task_id, TENANT, "key:alice", "ctx_1", {"state": state}, NOW)


async def assert_same(writer: SqliteStore, task_id: str) -> None:
    remembered = await writer.read_task(task_id, TENANT, history=True)
    async with SqliteStore(writer.path) as disk:
        on_disk = await disk.read_task(task_id, TENANT, history=True)
        messages = await disk.list_task_messages(task_id)
    assert remembered is not None and on_disk is not None
    assert remembered[0] == on_disk[0]
    assert (remembered[1].last_sequence, remembered[1].status, remembered[1].state) == (
        on_disk[1].last_sequence,
        on_disk[1].status,
        on_disk[1].state,
    )
    assert remembered[2] == on_disk[2]
    assert await writer.list_task_messages(task_id) == messages


async def test_a_task_written_and_advanced_reads_from_memory_as_from_disk(writer: SqliteStore) -> None:
    run = await create_run(
        writer, "run_c1", extras=[record("run_c1", "working"), TaskMessage("run_c1", "m1", {"text": "hi"}, NOW)]
    )
    assert writer._tasks.get("run_c1") is not None, "a new task is kept from its creating commit"
    await assert_same(writer, "run_c1")
    run, _ = await advance(writer, run, status="waiting", extras=[record("run_c1", "input-required")])
    await assert_same(writer, "run_c1")
    run, _ = await advance(writer, run, extras=[TaskMessage("run_c1", "m2", {"text": "accept"}, NOW)])
    await assert_same(writer, "run_c1")
    found = await writer.read_task("run_c1", TENANT, history=True)
    assert found is not None and found[1].last_sequence == 2 and found[2] == [{"text": "hi"}, {"text": "accept"}]
    assert await writer.read_task("run_c1", "globex") is None, "another tenant's task reads as missing from memory too"
    assert await writer.get_run("run_c1", "globex") is None


async def test_a_task_read_from_disk_is_kept_and_then_followed(writer: SqliteStore) -> None:
    async with SqliteStore(writer.path) as other:
        run = await create_run(other, "run_c2", extras=[record("run_c2", "working")])
    assert writer._tasks.get("run_c2") is None
    await assert_same(writer, "run_c2")
    assert writer._tasks.get("run_c2") is not None, "a read with no commit meanwhile is kept"
    await advance(writer, run, extras=[TaskMessage("run_c2", "m1", {"text": "later"}, NOW)])
    await assert_same(writer, "run_c2")


async def test_a_failed_commit_changes_nothing_in_memory(writer: SqliteStore) -> None:
    run = await create_run(
        writer, "run_c3", extras=[record("run_c3", "working"), TaskMessage("run_c3", "m1", {"text": "once"}, NOW)]
    )
    with pytest.raises(Conflict):
        await advance(writer, run, extras=[TaskMessage("run_c3", "m1", {"text": "again"}, NOW)])
    await assert_same(writer, "run_c3")


def test_a_read_that_a_commit_overtook_is_not_kept() -> None:
    cache = TaskCache()
    before = cache.commits
    cache.committed(Commit(run_row("run_other"), [], 0))
    cache.keep(TaskEntry(record("run_c4", "working"), run_row("run_c4"), ()), before)
    assert cache.get("run_c4") is None


def test_a_commit_that_does_not_continue_the_entry_drops_it() -> None:
    cache = TaskCache()
    cache.committed(Commit(run_row("run_c5", last_sequence=0), [], None, extras=[record("run_c5", "working")]))
    assert cache.get("run_c5") is not None
    cache.committed(Commit(run_row("run_c5", last_sequence=4), [], 3))  # made from a state this cache never saw
    assert cache.get("run_c5") is None


def test_the_oldest_entry_leaves_when_the_cache_is_full() -> None:
    cache = TaskCache(capacity=2)
    for name in ("run_a", "run_b", "run_c"):
        cache.committed(Commit(run_row(name), [], None, extras=[record(name, "working")]))
    assert [cache.get(n) is not None for n in ("run_a", "run_b", "run_c")] == [False, True, True]
