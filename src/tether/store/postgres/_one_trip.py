"""A commit in one statement: one round trip instead of a dozen.

The transaction (``_commit``) spends a round trip on each step: BEGIN, the claim, the
fence, the run, the events, the task, the message, each fan-out's read of its
subscribers, COMMIT. Measured at ``f42b63e``, a blocking ``message/send`` made 14 round
trips, and PostgreSQL answered a third as many sends as SQLite. Most commits enqueue no
delivery (nobody subscribed), and then every step fits in one statement
(``commit_in_one``) whose writes all wait on one guard.

A commit the statement does not write (``Missed``) is written by the transaction instead,
which says precisely why it refuses, if it does: the statement either writes the whole
commit or nothing, so trying the transaction next is always safe. Only a lost
compare-and-swap behind a guard that held is answered here (``SequenceConflict``): it is
the one refusal that is frequent, and the transaction would only find it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from tether.store._records import EVENT, IDEMPOTENCY, MESSAGE, RUN, TASK
from tether.store.base import Commit, Fanout, TaskMessage, TaskRecord
from tether.store.postgres._driver import Q, asyncpg

__all__ = ["Outcome", "parameters", "write"]

#: written; lost the compare-and-swap; not written, for a reason the transaction will tell
Outcome = Literal["written", "conflict", "missed"]

_CLAIM_COLUMNS = len(IDEMPOTENCY.columns)


def parameters(commit: Commit) -> list[Any] | None:
    """The statement's parameters, or None when the commit needs the transaction.

    It does when it registers a push config (a write the fan-out must then see) or calls a
    run's ``callbackUrl`` back (a delivery to enqueue, whose stream head is decided by
    reading the outbox after the run row is locked, which one statement's snapshot cannot).
    """
    quiet_tenants: list[str] = []
    quiet_tasks: list[str] = []
    tasks: list[list[Any]] = []
    messages: list[list[Any]] = []
    for extra in commit.extras:
        if isinstance(extra, TaskRecord):
            tasks.append(TASK.values(extra))
        elif isinstance(extra, TaskMessage):
            messages.append(MESSAGE.values(extra))
        elif isinstance(extra, Fanout) and extra.kind == "webhook":
            quiet_tenants.append(extra.tenant)
        elif isinstance(extra, Fanout) and extra.kind == "a2a-push" and extra.task_id is not None:
            quiet_tasks.append(extra.task_id)
        else:
            return None
    owner, epoch = commit.fence if commit.fence is not None else (None, None)
    claim = IDEMPOTENCY.values(commit.idempotency) if commit.idempotency is not None else [None] * _CLAIM_COLUMNS
    events = [EVENT.values(event) for event in commit.events]
    return [
        *RUN.values(commit.run),
        commit.expected_sequence,
        owner,
        epoch,
        *claim,
        *_columns(events, len(EVENT.columns)),
        *_columns(tasks, len(TASK.columns)),
        *_columns(messages, len(MESSAGE.columns)),
        sorted(set(quiet_tenants)),
        sorted(set(quiet_tasks)),
    ]


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows as one array per column (what ``unnest`` takes)."""
    return [list(column) for column in zip(*rows)] if rows else [[] for _ in range(width)]


async def write(conn: asyncpg.Connection, params: list[Any]) -> Outcome:
    """Try the commit in one statement, outside any transaction of the caller's."""
    try:
        row = await conn.fetchrow(Q["commit_in_one"], *params)
    except asyncpg.UniqueViolationError:
        return "missed"  # a claim or a message raced in after the guard: the transaction says which
    if row["written"]:
        return "written"
    return "conflict" if row["guarded"] else "missed"
