"""A commit made ready for the writer process, and the fan-out it does inside the transaction.

A commit is laid out as rows by table in the event loop, before it is queued; the writer
process then writes it in one of two ways (``_group``): grouped with the other commits of
its batch (``CommitJob.prepare``: its checks now, its rows inserted with the batch's), or
alone, when something in the batch refused (``CommitJob.write``: every refusal said
precisely, the idempotency claim checked first). A ``CommitJob`` crosses to the writer
process pickled, so it holds plain values only: rows, keys, and the fan-outs that may find a
subscriber, their bodies rendered (``SqliteStore.commit`` decides which).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from tether.errors import Conflict, SequenceConflict, StoreUnavailable
from tether.ids import new_id
from tether.store import _records
from tether.store.base import (
    BlobRow,
    Commit,
    DeliveryRow,
    Fanout,
    IdempotencyClaimed,
    LeaseLost,
    PushConfigRow,
    RunBlob,
    TaskMessage,
    TaskRecord,
    WebhookRow,
)
from tether.store.fanout import targets as fanout_targets
from tether.store.sqlite import _inserts
from tether.store.sqlite._driver import Q, fetch_all, fetch_one, now_iso

#: each tenant's webhooks as this writer process last read them: a webhook write forgets its
#: tenant's, a transaction that does not commit all (``_group``)
Webhooks = dict[str, list[WebhookRow]]
_WEBHOOKS: Webhooks = {}


def forget_webhooks(tenant: str | None = None) -> None:
    """Forget what was read of ``tenant``'s webhooks (of every tenant's, without one)."""
    if tenant is None:
        _WEBHOOKS.clear()
    else:
        _WEBHOOKS.pop(tenant, None)


class CommitJob:
    """One commit as the writer writes it: its rows by table, and what it must do in the transaction.

    The rows that need no reading (the new run, its events, the task record and messages,
    the file bytes and their links to the run) are laid out here, in the event loop; push
    configs and fan-outs wait for the writer, because they write through a statement or read
    the subscribers. ``may_match`` says of a fan-out whether a subscriber may be there for
    it: the others are left out, and the body of each one kept is rendered here (a job holds
    no callables).
    """

    __slots__ = (
        "_claim",
        "_fence",
        "_later",
        "_messages",
        "_new_configs",
        "_rows",
        "_run_id",
        "_update",
        "_updated_at",
    )

    def __init__(self, commit: Commit, may_match: Callable[[Fanout], bool]) -> None:
        run = commit.run
        self._run_id = run.run_id
        self._fence = commit.fence
        self._updated_at = run.updated_at
        self._rows = rows = _inserts.Rows()
        #: the idempotency key the commit claims (tenant, scope, key), and its row
        self._claim: tuple[tuple[str, str, str], list[Any]] | None = None
        if (claim := commit.idempotency) is not None:
            self._claim = ((claim.tenant, claim.scope, claim.key), _records.IDEMPOTENCY.values(claim))
        creates = commit.expected_sequence is None
        #: the compare-and-swap of a run that exists
        self._update: dict[str, Any] | None = None
        if creates:
            rows.add(_inserts.RUNS, _records.RUN.values(run))
        else:
            self._update = {
                "status": run.status,
                "last_sequence": run.last_sequence,
                "state": orjson.dumps(run.state),
                "updated_at": run.updated_at,
                "due_at": run.due_at,
                "run_id": run.run_id,
                "expected_sequence": commit.expected_sequence,
            }
        for event in commit.events:
            rows.add(_inserts.EVENTS, _records.EVENT.values(event))
        for blob in commit.blobs:
            rows.add(_inserts.BLOBS, _records.BLOB.values(BlobRow(blob.digest, blob.size, run.updated_at, blob.data)))
            rows.add(_inserts.RUN_BLOBS, _records.RUN_BLOB.values(RunBlob(run.run_id, blob.digest)))
        message_task, message_ids = "", list[str]()
        self._later: list[PushConfigRow | Fanout] = []  # written by the writer: they read, or must be read
        # A push config can only be set on a task that exists: the task of a run this commit
        # creates has only those the commit itself registers, and nothing needs to be read.
        self._new_configs: list[tuple[str, str]] | None = [] if creates else None
        for extra in commit.extras:
            if isinstance(extra, TaskRecord):
                rows.add(_inserts.TASKS, _records.TASK.values(extra))
            elif isinstance(extra, TaskMessage):
                rows.add(_inserts.MESSAGES, _records.MESSAGE.values(extra))
                message_ids.append(extra.message_id)
                message_task = extra.task_id
            elif isinstance(extra, PushConfigRow):
                self._later.append(extra)
                if self._new_configs is not None and extra.task_id == run.run_id:
                    self._new_configs.append((extra.config_id, extra.url))
            elif isinstance(extra, Fanout) and may_match(extra):
                self._later.append(extra if isinstance(extra.body, bytes) else replace(extra, body=extra.rendered()))
            elif isinstance(extra, Fanout):
                continue  # no subscriber can be there for it
            else:
                raise TypeError(f"unknown commit extra {type(extra).__name__}")
        #: the task and ids of the messages the commit records (what a duplicate's refusal names)
        self._messages = (message_task, message_ids) if message_ids else None

    def prepare(self, conn: sqlite3.Connection) -> _inserts.Rows:
        """The commit's checks and reads now; its rows, its claim among them, for the batch's inserts."""
        prepared = self._checked(conn)
        if self._claim is not None:
            prepared.add(_inserts.IDEMPOTENCY, self._claim[1])
        return prepared

    def write(self, conn: sqlite3.Connection) -> int:
        """The commit on its own: every refusal said precisely, the claim checked first."""
        if self._claim is not None:
            claim, row = self._claim
            if conn.execute(_inserts.IDEMPOTENCY.sql(1), row).rowcount != 1:
                raise _claimed_before(conn, claim)
        prepared = self._checked(conn)
        try:
            _inserts.insert(conn, [prepared])
        except _inserts.Refused as refused:
            raise self._refusal(refused) from refused
        return prepared.enqueued

    def _refusal(self, refused: _inserts.Refused) -> BaseException:
        """What a table's refusal of this commit's row means to the caller."""
        if refused.table is _inserts.RUNS:
            return SequenceConflict(self._run_id)  # a run with this id exists already
        if refused.table is _inserts.MESSAGES and self._messages is not None:
            task_id, message_ids = self._messages
            names = ", ".join(repr(message_id) for message_id in message_ids)
            return Conflict(
                f"message {names} is already in the history of task {task_id!r}",
                code="message_already_recorded",
            )
        return refused.__cause__ or refused

    def _checked(self, conn: sqlite3.Connection) -> _inserts.Rows:
        """Run what cannot wait for the inserts; the commit's rows but its claim, with its deliveries."""
        run_id = self._run_id
        if self._fence is not None:
            owner, epoch = self._fence
            if conn.execute(Q["check_fence"], (run_id, owner, epoch, now_iso())).fetchone() is None:
                raise LeaseLost(run_id)
        if self._update is not None and conn.execute(Q["update_run"], self._update).rowcount != 1:
            raise SequenceConflict(run_id)
        prepared = self._rows.copy()
        for extra in self._later:
            if isinstance(extra, PushConfigRow):
                conn.execute(Q["upsert_push_config"], _records.PUSH_CONFIG.named(extra))
            else:
                known = self._new_configs if extra.task_id == run_id else None
                prepared.enqueued += fan_out(conn, extra, self._updated_at, known, prepared)
        return prepared


def _claimed_before(conn: sqlite3.Connection, claim: tuple[str, str, str]) -> Exception:
    """The refusal of a commit whose idempotency key (tenant, scope, key) is claimed already, with the record
    that holds it."""
    existing = fetch_one(conn, _records.IDEMPOTENCY, Q["get_idempotency"], claim)
    if existing is None:  # DO NOTHING only yields to a claim, and claims are never deleted
        return StoreUnavailable(f"idempotency key {claim[1]}:{claim[2]} is claimed but unreadable")
    return IdempotencyClaimed(existing)


def fan_out(
    conn: sqlite3.Connection,
    fanout: Fanout,
    now: str,
    new_configs: list[tuple[str, str]] | None,
    rows: _inserts.Rows,
) -> int:
    """Add one outbox row to ``rows`` per subscriber that matches (read inside the
    caller's transaction); how many.

    A tenant's webhooks are read once and kept (``_WEBHOOKS``). ``new_configs``: when the
    commit creates the run, its
    task's push configs are those the commit itself registers (as config id, url): a
    config can only be set on a task that exists.
    """
    configs: list[tuple[str, str]] = []
    if fanout.kind == "a2a-push":
        if new_configs is None:
            stored = fetch_all(conn, _records.PUSH_CONFIG, Q["list_push_configs"], (fanout.task_id,))
            new_configs = [(config.config_id, config.url) for config in stored]
        configs = new_configs
    hooks: list[WebhookRow] = []
    if fanout.kind == "webhook":
        if fanout.tenant not in _WEBHOOKS:
            _WEBHOOKS[fanout.tenant] = fetch_all(conn, _records.WEBHOOK, Q["tenant_webhooks"], (fanout.tenant,))
        hooks = _WEBHOOKS[fanout.tenant]
    found = fanout_targets(fanout, configs, hooks)
    body = fanout.rendered() if found else b""
    for target_id, stream_key, url in found:
        delivery = DeliveryRow(
            delivery_id=new_id("dlv_"),
            tenant=fanout.tenant,
            kind=fanout.kind,
            target_id=target_id,
            stream_key=stream_key,
            run_id=fanout.run_id,
            sequence=fanout.sequence,
            url=url,
            body=body,
            final=fanout.final,
            status="pending",
            attempts=0,
            next_attempt_at=now,
            last_error=None,
            created_at=now,
            updated_at=now,
        )
        rows.add(_inserts.OUTBOX, _records.DELIVERY.values(delivery))
    return len(found)
