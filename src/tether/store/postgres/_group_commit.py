"""Commits in one statement, many at a time: group commit on a database several hosts share.

The transaction (``_commit``) spends a round trip on each step: BEGIN, the claim, the
fence, the run, the events, the task, the message, each fan-out's read of its
subscribers, COMMIT; measured at ``f42b63e``, a blocking ``message/send`` made 14 round
trips. And each commit is a WAL flush: about 4 ms on these machines, as SQLite's fsync
is. Most commits enqueue no delivery (nobody subscribed); those queue here, and whatever
has queued while the previous statements ran is written by one ``commit_group``
statement: one round trip and one flush for all of them, each commit still all or
nothing behind its own guard.

A commit the statement does not write is written alone by the transaction, which says
precisely why it refuses, if it does (the statement wrote none of it, so that is always
safe). Only a lost compare-and-swap behind a guard that held is answered here
(``SequenceConflict``): it is the one frequent refusal, and the transaction would only find
it again. A statement that fails as a whole (a unique violation a concurrent commit caused
after the guard's snapshot, a deadlock) sends each of its commits to the transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from tether.store._records import EVENT, IDEMPOTENCY, MESSAGE, RUN, TASK
from tether.store.base import Commit, Fanout, TaskMessage, TaskRecord
from tether.store.postgres._driver import Q, asyncpg

__all__ = ["GroupCommit", "Outcome", "Rows", "write_group"]

#: written; lost the compare-and-swap; not written, for a reason the transaction will tell
Outcome = Literal["written", "conflict", "missed"]

#: commits per statement (each adds its rows to a dozen arrays; the statement is prepared once)
MAX_GROUP = 256
#: statements under way at once: while one waits for its flush, the next gathers commits
MAX_STATEMENTS = 3

#: the columns of each of a commit's tables, in the statement's order: the run (with the
#: expected sequence and the fence), then claims, events, tasks and messages (each led by
#: the commit's run id), then the tenants and the tasks that must have no subscriber
_WIDTHS = (
    len(RUN.columns) + 3,
    1 + len(IDEMPOTENCY.columns),
    1 + len(EVENT.columns),
    1 + len(TASK.columns),
    1 + len(MESSAGE.columns),
    2,
    2,
)


class Rows:
    """One commit laid out as the statement's rows, or ``None`` from ``of`` when it needs the transaction."""

    __slots__ = ("run_id", "tables")

    def __init__(self, run_id: str, tables: tuple[list[list[Any]], ...]) -> None:
        self.run_id = run_id
        self.tables = tables

    @classmethod
    def of(cls, commit: Commit) -> Rows | None:
        """The commit's rows; None when it registers a push config (a write its fan-out must
        then see), calls a run's ``callbackUrl`` back (a delivery to enqueue, whose place in
        its stream is decided by reading the outbox after the run is locked) or stores file
        bytes (rare, and each of them megabytes: not worth an array of the statement)."""
        if commit.blobs:
            return None
        run_id = commit.run.run_id
        tasks: list[list[Any]] = []
        messages: list[list[Any]] = []
        tenants: list[list[Any]] = []
        pushes: list[list[Any]] = []
        for extra in commit.extras:
            if isinstance(extra, TaskRecord):
                tasks.append([run_id, *TASK.values(extra)])
            elif isinstance(extra, TaskMessage):
                messages.append([run_id, *MESSAGE.values(extra)])
            elif isinstance(extra, Fanout) and extra.kind == "webhook":
                tenants.append([run_id, extra.tenant])
            elif isinstance(extra, Fanout) and extra.kind == "a2a-push" and extra.task_id is not None:
                pushes.append([run_id, extra.task_id])
            else:
                return None
        owner, epoch = commit.fence if commit.fence is not None else (None, None)
        claims = [[run_id, *IDEMPOTENCY.values(commit.idempotency)]] if commit.idempotency is not None else []
        events = [[run_id, *EVENT.values(event)] for event in commit.events]
        run = [[*RUN.values(commit.run), commit.expected_sequence, owner, epoch]]
        return cls(run_id, (run, claims, events, tasks, messages, tenants, pushes))


def parameters(group: Sequence[Rows]) -> list[list[Any]]:
    """The statement's parameters: every table's rows of every commit, one array per column."""
    params: list[list[Any]] = []
    for table, width in enumerate(_WIDTHS):
        rows = [row for rows in group for row in rows.tables[table]]
        params.extend([list(column) for column in zip(*rows)] if rows else [[] for _ in range(width)])
    return params


async def write_group(conn: asyncpg.Connection, group: Sequence[Rows]) -> list[Outcome]:
    """Write ``group`` (one commit per run) in one statement; each commit's outcome, in order."""
    try:
        rows = await conn.fetch(Q["commit_group"], *parameters(group))
    except (asyncpg.UniqueViolationError, asyncpg.DeadlockDetectedError):
        return ["missed"] * len(group)  # undone whole: each commit alone says why
    outcome: dict[str, Outcome] = {
        row["run_id"]: "written" if row["written"] else "conflict" if row["guarded"] else "missed" for row in rows
    }
    return [outcome[rows.run_id] for rows in group]


class GroupCommit:
    """Gathers commits while statements are under way and writes each gathering in one statement.

    ``write`` writes one group (``write_group`` on a connection of the pool). A group holds
    one commit per run: a second commit to a run waits for the next group, so that each
    compare-and-swap is decided alone.
    """

    def __init__(self, write: Callable[[list[Rows]], Awaitable[list[Outcome]]]) -> None:
        self._write = write
        self._waiting: list[tuple[Rows, asyncio.Future[Outcome]]] = []
        self._writers: set[asyncio.Task[None]] = set()

    async def commit(self, rows: Rows) -> Outcome:
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        self._waiting.append((rows, future))
        if len(self._writers) < MAX_STATEMENTS:
            writer = asyncio.create_task(self._write_waiting(), name="tether-pg-group-commit")
            self._writers.add(writer)
            writer.add_done_callback(self._writers.discard)
        return await asyncio.shield(future)

    async def close(self) -> None:
        """Let the statements under way, and the commits waiting for them, finish."""
        await asyncio.gather(*self._writers, return_exceptions=True)

    async def _write_waiting(self) -> None:
        while self._waiting:
            group = self._take()
            try:
                outcomes = await self._write([rows for rows, _ in group])
            except asyncio.CancelledError:
                for _, future in group:  # nobody waits in vain
                    future.cancel()
                raise
            except Exception as exc:  # noqa: BLE001 - the statement's failure is each of its commits'
                for _, future in group:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), outcome in zip(group, outcomes):
                if not future.done():
                    future.set_result(outcome)

    def _take(self) -> list[tuple[Rows, asyncio.Future[Outcome]]]:
        """The oldest waiting commits, at most one per run and ``MAX_GROUP`` in all."""
        group: list[tuple[Rows, asyncio.Future[Outcome]]] = []
        later: list[tuple[Rows, asyncio.Future[Outcome]]] = []
        runs: set[str] = set()
        for waiting in self._waiting:
            if len(group) < MAX_GROUP and waiting[0].run_id not in runs:
                runs.add(waiting[0].run_id)
                group.append(waiting)
            else:
                later.append(waiting)
        self._waiting = later
        return group


def _retrieved(future: asyncio.Future[Outcome]) -> None:
    """Mark a failed statement's error seen, for a commit whose caller stopped waiting."""
    if not future.cancelled():
        future.exception()
