"""PostgreSQL answers ``tasks/get`` from memory only when the database proves it current.

The unit tests drive ``TaskReads`` with a fake read whose answers they release by hand;
the others put two ``PostgresStore`` objects (two hosts) on one database, with no hints
between them: what one host acknowledges, the other must never read older.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from store_records import NOW, TENANT, advance, callback_fanout, create_run, event, run_row

from tether.errors import SequenceConflict
from tether.store.base import Commit, RunRow, TaskMessage, TaskRecord
from tether.store.postgres import PostgresStore
from tether.store.postgres._task_reads import TaskReads

pytestmark = pytest.mark.timeout(60)

Hosts = Callable[[], Awaitable[PostgresStore]]


def record(task_id: str, state: str) -> TaskRecord:
    return TaskRecord(task_id, TENANT, "key:alice", "ctx_1", {"state": state}, NOW)


# the batched read, against a fake database -------------------------------------------------


class FakeDatabase:
    """Answers ``current_tasks`` from ``runs`` (task id -> (sequence, status)), one read at a time on demand."""

    def __init__(self) -> None:
        self.runs: dict[str, tuple[int, str]] = {}
        #: the ids and held sequences of every read asked for, in order
        self.reads: list[dict[str, int]] = []
        self._release: asyncio.Queue[None] = asyncio.Queue()
        self.hold = False
        #: set when a read begins (its snapshot is taken)
        self.begun = asyncio.Event()

    def release(self) -> None:
        self._release.put_nowait(None)

    async def fetch(self, task_ids: list[str], held: list[int]) -> Sequence[Any]:
        self.reads.append(dict(zip(task_ids, held)))
        snapshot = dict(self.runs)  # the read's snapshot is taken when it begins
        self.begun.set()
        if self.hold:
            await self._release.get()
        rows = []
        for task_id, known in zip(task_ids, held):
            if task_id not in snapshot:
                continue
            sequence, status = snapshot[task_id]
            row: dict[str, Any] = {"task_id": task_id, "last_sequence": sequence, "workflow_id": None}
            if sequence != known:
                row.update(
                    tenant=TENANT,
                    workflow_id="wf",
                    status=status,
                    state=b'{"status": "%s"}' % status.encode(),
                    created_at=NOW,
                    updated_at=NOW,
                    due_at=None,
                    task_tenant=TENANT,
                    principal="key:alice",
                    context_id="ctx_1",
                    record=b'{"state": "%s"}' % status.encode(),
                    task_updated_at=NOW,
                    task_state=status,
                    history=[],
                )
            rows.append(row)
        return rows


async def test_reads_that_arrive_together_share_one_read_and_a_later_one_never_joins_it() -> None:
    db = FakeDatabase()
    db.runs = {"t1": (1, "running"), "t2": (4, "running")}
    db.hold = True
    reads = TaskReads(db.fetch)
    first = asyncio.ensure_future(reads.read("t1"))
    await db.begun.wait()  # the first read is under way: it saw t1 at sequence 1
    db.begun.clear()
    db.runs["t1"] = (2, "waiting")  # a commit acknowledged after that read began...
    late = [asyncio.ensure_future(reads.read(task_id)) for task_id in ("t1", "t2", "t1")]
    db.release()
    entry = await first
    assert entry is not None and entry.run.last_sequence == 1, "the first read answers as of when it began"
    db.release()
    answers = await asyncio.gather(*late)
    assert [a.run.last_sequence if a else None for a in answers] == [2, 4, 2], "...and the reads after it see it"
    assert [sorted(r) for r in db.reads] == [["t1"], ["t1", "t2"]], "the three later reads shared one read"
    await reads.close()


async def test_a_held_copy_is_answered_when_its_sequence_is_current_and_replaced_when_not() -> None:
    db = FakeDatabase()
    db.runs = {"t1": (3, "running")}
    reads = TaskReads(db.fetch)
    held = await reads.read("t1")
    assert held is not None and db.reads == [{"t1": -1}]
    assert await reads.read("t1") is held, "same sequence: the copy is the answer"
    assert db.reads[-1] == {"t1": 3}
    db.runs["t1"] = (5, "waiting")
    fresh = await reads.read("t1")
    assert fresh is not None and fresh is not held and (fresh.run.last_sequence, fresh.run.status) == (5, "waiting")
    assert await reads.read("t1") is fresh
    await reads.close()


async def test_a_terminal_copy_needs_no_read_and_a_missing_task_is_none() -> None:
    db = FakeDatabase()
    db.runs = {"done": (7, "completed")}
    reads = TaskReads(db.fetch)
    first = await reads.read("done")
    assert first is not None and first.run.is_terminal
    assert await reads.read("done") is first
    assert await reads.read("nobody") is None
    assert db.reads == [{"done": -1}, {"nobody": -1}], "a terminal task is final: no read proves it again"
    await reads.close()


async def test_a_failed_read_fails_every_request_that_shared_it_and_the_next_one_reads_again() -> None:
    calls = 0

    async def failing(task_ids: list[str], held: list[int]) -> Sequence[Any]:
        nonlocal calls
        calls += 1
        raise ConnectionResetError("gone")

    reads = TaskReads(failing)
    outcomes = await asyncio.gather(reads.read("t1"), reads.read("t2"), return_exceptions=True)
    assert all(isinstance(o, ConnectionResetError) for o in outcomes) and calls == 1
    with pytest.raises(ConnectionResetError):
        await reads.read("t1")
    assert calls == 2
    await reads.close()


# two hosts on one database ---------------------------------------------------------------------


async def test_a_read_on_another_host_is_never_older_than_a_write_acknowledged_before_it(
    postgres_stores: Hosts,
) -> None:
    """Host A writes, host B reads, many tasks at once: each read on B begins after the write
    it checks was acknowledged by A, and B holds an older copy of every task (no hint tells it)."""
    a, b = await postgres_stores(), await postgres_stores()
    tasks = [f"run_ryw_{i}" for i in range(8)]
    runs: dict[str, RunRow] = {}
    for task_id in tasks:
        runs[task_id] = await create_run(a, task_id, extras=[record(task_id, "working")])
        assert await b.read_task(task_id, TENANT) is not None  # B now holds a copy at sequence 0
    stale: list[str] = []
    stop = asyncio.Event()

    async def write_then_read(task_id: str) -> None:
        run = runs[task_id]
        for step in range(12):
            state = "input-required" if step % 2 else "working"
            message = TaskMessage(task_id, f"m{step}", {"step": step}, NOW)
            run, _ = await advance(a, run, extras=[record(task_id, state), message])
            found = await b.read_task(task_id, TENANT, history=True)
            assert found is not None
            task, row, history = found
            if (
                row.last_sequence < run.last_sequence
                or task.state != state
                or history != [{"step": s} for s in range(step + 1)]
            ):
                stale.append(f"{task_id}: wrote {run.last_sequence} ({state}), read {row.last_sequence} ({task.state})")

    async def busy_reader() -> None:  # more readers on B, so that reads share batches
        rng = random.Random(7)
        while not stop.is_set():
            await b.read_task(rng.choice(tasks), TENANT)

    readers = [asyncio.create_task(busy_reader()) for _ in range(4)]
    try:
        await asyncio.gather(*(write_then_read(task_id) for task_id in tasks))
    finally:
        stop.set()
        await asyncio.gather(*readers)
    assert stale == []


async def test_a_task_read_before_it_ended_reads_as_ended_on_the_other_host(postgres_stores: Hosts) -> None:
    a, b = await postgres_stores(), await postgres_stores()
    run = await create_run(a, "run_ends", extras=[record("run_ends", "input-required")], status="waiting-input")
    before = await b.read_task("run_ends", TENANT)
    assert before is not None and before[0].state == "input-required"
    await advance(a, run, status="completed", extras=[record("run_ends", "completed")])
    after = await b.read_task("run_ends", TENANT)
    assert after is not None and (after[0].state, after[1].status) == ("completed", "completed")
    assert await b.read_task("run_ends", "globex") is None, "another tenant's task stays missing, from memory too"


@pytest.mark.parametrize("way", ["one statement", "transaction"])
async def test_a_terminal_run_takes_no_more_commits(postgres_stores: Hosts, way: str) -> None:
    """What lets a host answer a terminal task from memory: nothing is ever written after it."""
    a, b = await postgres_stores(), await postgres_stores()
    run = await create_run(a, "run_final", extras=[record("run_final", "working")])
    done, _ = await advance(a, run, status="completed", extras=[record("run_final", "completed")])
    assert await b.read_task("run_final", TENANT) is not None
    extras = [callback_fanout("run_final", sequence=2)] if way == "transaction" else []
    late = run_row("run_final", status="running", last_sequence=2)
    with pytest.raises(SequenceConflict):
        await b.commit(
            Commit(late, [event("run_final", 2)], done.last_sequence, None, [*extras, record("run_final", "working")])
        )
    fresh = PostgresStore(a.dsn)
    async with fresh:
        found = await fresh.read_task("run_final", TENANT)
    assert found is not None and (found[0].state, found[1].last_sequence) == ("completed", 1)
