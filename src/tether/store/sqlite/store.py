"""SQLite store: WAL, fsync'd commits, one writer process that groups commits.

Every write is a job for the writer process (``_writer``), which runs all the jobs waiting
for it in one transaction (``_group``), so that many requests share one fsync; a commit is
laid out as rows by table before it is sent (``_commit``), and the rows of a whole batch go
in with one INSERT per table (``_inserts``); the other writes are ``_writes``. Reads run on
a small pool of reader connections, which WAL lets run beside the writer. Connections, queries and rows read as
records are in ``_driver``, the schema in ``_migrate``, and the one-host lock in ``_host``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

import orjson

from tether.caches import holds_copies
from tether.errors import StoreUnavailable
from tether.failpoints import hit
from tether.store._records import (
    CREDENTIAL,
    DELIVERY,
    EVENT,
    IDEMPOTENCY,
    KEY,
    PUSH_CONFIG,
    RUN,
    TASK,
    WEBHOOK,
    WORKFLOW,
    effect_params,
)
from tether.store._task_cache import TaskCache, TaskEntry
from tether.store.base import (
    Attempt,
    Commit,
    CredentialRow,
    DeliveryRow,
    EffectClaim,
    EffectRecord,
    EventRow,
    Fanout,
    IdempotencyRecord,
    KeyRow,
    PushConfigRow,
    RunRow,
    Store,
    TaskRecord,
    WebhookRow,
    WorkflowRow,
)
from tether.store.sqlite import _inserts, _writes
from tether.store.sqlite._claims import Claims
from tether.store.sqlite._commit import CommitJob
from tether.store.sqlite._driver import Q, connect, fetch_all, fetch_one, later_iso, now_iso
from tether.store.sqlite._host import StoreInUse, lock_host, unlock_host
from tether.store.sqlite._migrate import apply_migrations
from tether.store.sqlite._writer import Writer

__all__ = ["SqliteStore", "StoreInUse"]

T = TypeVar("T")

#: the columns a run listing reads, and a delivery listing
_RUN_COLUMNS = ", ".join(RUN.columns)
_DELIVERY_COLUMNS = ", ".join(DELIVERY.columns)


@holds_copies("_tasks", "_push_tasks", "_webhook_tenants", "_claims")
class SqliteStore:
    """The embedded default store (one file, WAL, synchronous=FULL), for one host process.

    It is not ``shared``: the engine drives its runs without leases, and the lease
    methods below exist so that the one contract holds for every backend.
    """

    shared = False

    def __init__(self, path: Path, *, readers: int = 4) -> None:
        self.path = path
        self._readers = readers
        self._state = "unopened"
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        #: every commit passes through this process, so the tasks it read or wrote lately are kept
        self._tasks = TaskCache()
        self._writer = Writer(on_batch=self._batched)
        #: the tasks that have (or had) a push config, and the tenants that have (or had) a
        #: webhook, as the writer process will see them: kept when the write is sent, so that a
        #: commit sent after it renders the fan-outs it may match, and leaves out the others
        #: (a job crosses to the writer pickled, and a fan-out's body is a callable until rendered)
        self._push_tasks: set[str] = set()
        self._webhook_tenants: set[str] = set()
        #: told how many writes each transaction (one fsync) made durable (metrics)
        self.on_group: Callable[[int], None] | None = None
        self._host_lock: int | None = None
        #: the deliveries this process is sending (one host per file: memory is where claims live)
        self._claims = Claims()

    def _batched(self, writes: int) -> None:
        if self.on_group is not None:
            self.on_group(writes)

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r}, state={self._state})"

    # lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        if self._state != "unopened":
            raise RuntimeError(f"cannot open a store that is {self._state}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(self.path)
        try:
            apply_migrations(conn)
            self._push_tasks = {row[0] for row in conn.execute(Q["push_config_tasks"])}
            self._webhook_tenants = {row[0] for row in conn.execute(Q["webhook_tenants"])}
        finally:
            conn.close()
        self._writer.start(self.path)
        self._pool = ThreadPoolExecutor(max_workers=self._readers, thread_name_prefix="tether-sqlite-reader")
        self._state = "open"

    def serve(self) -> None:
        """Claim the file for this host: a SQLite store serves one host process at a time.

        The host answers reads from memory because every commit passes through it; a
        second host on the same file would break that, so it is refused here (StoreInUse),
        and the lock ends with the process (or at ``close``).
        """
        self._host_lock = lock_host(self.path)

    async def close(self) -> None:
        if self._host_lock is not None:
            unlock_host(self._host_lock)
            self._host_lock = None
        if self._state != "open":
            self._state = "closed"
            return
        self._state = "closed"
        self._tasks = TaskCache()
        await self._writer.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        with self._conns_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # the writer and the readers ----------------------------------------------------------

    async def _write(
        self, fn: Callable[..., T], *args: Any, prepare: Callable[[sqlite3.Connection], _inserts.Rows] | None = None
    ) -> T:
        """``fn(conn, *args)`` in the writer process (``fn`` one of ``_writes``, or a commit's with its ``prepare``)."""
        if self._state != "open":
            raise StoreUnavailable(f"the store is {self._state}")
        return await self._writer.write(fn, args, prepare)

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
            with self._conns_lock:
                self._reader_conns.append(conn)
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._state != "open" or self._pool is None:
            raise StoreUnavailable(f"the store is {self._state}")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(self._reader()))

    # runs and events -------------------------------------------------------------------

    async def commit(self, commit: Commit) -> int:
        self._push_tasks.update(x.task_id for x in commit.extras if isinstance(x, PushConfigRow))
        job = CommitJob(commit, self._may_match)
        hit("store.commit.before")
        enqueued: int = await self._write(job.write, prepare=job.prepare)
        hit("store.commit.after")
        self._tasks.committed(commit)
        return enqueued

    def _may_match(self, fanout: Fanout) -> bool:
        """Whether a subscriber may be there for ``fanout`` when the writer reaches it."""
        if fanout.kind == "a2a-push":
            return fanout.task_id in self._push_tasks
        if fanout.kind == "webhook":
            return fanout.tenant in self._webhook_tenants
        return True  # a callback's url is the run's own

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRow | None:
        cached = self._tasks.get(run_id)
        if cached is not None:
            return cached.run if tenant in (None, cached.run.tenant) else None
        if tenant is None:
            return await self._read(lambda conn: fetch_one(conn, RUN, Q["get_run"], (run_id,)))
        return await self._read(lambda conn: fetch_one(conn, RUN, Q["get_run_for_tenant"], (run_id, tenant)))

    async def list_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        workflow_id: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[RunRow]:
        clauses = ["tenant = ?"]
        params: list[Any] = [tenant]
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        if workflow_id is not None:
            clauses.append("workflow_id = ?")
            params.append(workflow_id)
        if before is not None:
            clauses.append("run_id < ?")
            params.append(before)
        params.append(limit)
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE {' AND '.join(clauses)} ORDER BY run_id DESC LIMIT ?"
        return await self._read(lambda conn: fetch_all(conn, RUN, sql, params))

    async def active_runs(self) -> list[RunRow]:
        return await self._read(lambda conn: fetch_all(conn, RUN, Q["active_runs"]))

    async def read_events(self, run_id: str, after: int = -1, limit: int = 1000) -> list[EventRow]:
        return await self._read(lambda conn: fetch_all(conn, EVENT, Q["read_events"], (run_id, after, limit)))

    # idempotency -----------------------------------------------------------------------

    async def get_idempotency(self, tenant: str, scope: str, key: str) -> IdempotencyRecord | None:
        return await self._read(lambda conn: fetch_one(conn, IDEMPOTENCY, Q["get_idempotency"], (tenant, scope, key)))

    # keys --------------------------------------------------------------------------------

    async def insert_key(self, key: KeyRow) -> None:
        refusal = f"an active key named {key.name!r} already exists"
        await self._write(_writes.insert_unique, Q["insert_key"], KEY.named(key), refusal, "key_exists")

    async def get_key(self, key_id: str) -> KeyRow | None:
        return await self._read(lambda conn: fetch_one(conn, KEY, Q["get_key"], (key_id,)))

    async def list_keys(self) -> list[KeyRow]:
        return await self._read(lambda conn: fetch_all(conn, KEY, Q["list_keys"]))

    async def revoke_key(self, name: str, revoked_at: str) -> bool:
        return await self._write(_writes.changed, Q["revoke_key"], (revoked_at, name))

    # outbound credentials ----------------------------------------------------------------

    async def insert_credential(self, row: CredentialRow) -> None:
        refusal, code = f"a credential named {row.name!r} already exists", "credential_exists"
        await self._write(_writes.insert_unique, Q["insert_credential"], CREDENTIAL.named(row), refusal, code)

    async def get_credential(self, name: str) -> CredentialRow | None:
        return await self._read(lambda conn: fetch_one(conn, CREDENTIAL, Q["get_credential"], (name,)))

    async def list_credentials(self) -> list[CredentialRow]:
        return await self._read(lambda conn: fetch_all(conn, CREDENTIAL, Q["list_credentials"]))

    async def delete_credential(self, name: str) -> bool:
        return await self._write(_writes.changed, Q["delete_credential"], (name,))

    # workflows ---------------------------------------------------------------------------

    async def put_workflow(self, row: WorkflowRow) -> bool:
        """Store a definition; returns False when the identical one was already there."""
        definition = orjson.dumps(row.definition, option=orjson.OPT_SORT_KEYS)
        return await self._write(_writes.put_workflow, row.workflow_id, definition, WORKFLOW.named(row))

    async def list_workflows(self) -> list[WorkflowRow]:
        return await self._read(lambda conn: fetch_all(conn, WORKFLOW, Q["list_workflows"]))

    async def claim_setting(self, name: str, value: str) -> str:
        return await self._write(_writes.claim_setting, name, value)

    async def settings_under(self, prefix: str) -> dict[str, str]:
        return await self._read(lambda conn: dict(conn.execute(Q["settings_under"], (prefix,)).fetchall()))

    # A2A tasks ---------------------------------------------------------------------------

    async def get_task(self, task_id: str, tenant: str | None = None) -> TaskRecord | None:
        if tenant is None:
            return await self._read(lambda conn: fetch_one(conn, TASK, Q["get_task"], (task_id,)))
        return await self._read(lambda conn: fetch_one(conn, TASK, Q["get_task_for_tenant"], (task_id, tenant)))

    async def read_task(
        self, task_id: str, tenant: str, *, history: bool = False
    ) -> tuple[TaskRecord, RunRow, list[dict[str, Any]] | None] | None:
        cached = self._tasks.get(task_id)
        if cached is None:
            commits = self._tasks.commits

            def read(conn: sqlite3.Connection) -> TaskEntry | None:
                task = fetch_one(conn, TASK, Q["get_task_for_tenant"], (task_id, tenant))
                run = fetch_one(conn, RUN, Q["get_run_for_tenant"], (task_id, tenant)) if task is not None else None
                if task is None or run is None:
                    return None
                messages = tuple(orjson.loads(r[0]) for r in conn.execute(Q["list_task_messages"], (task_id,)))
                return TaskEntry(task, run, messages)

            cached = await self._read(read)
            if cached is None:
                return None
            self._tasks.keep(cached, commits)
        if cached.run.tenant != tenant:
            return None
        return cached.record, cached.run, list(cached.history) if history else None

    async def list_tasks(
        self,
        tenant: str,
        *,
        context_id: str | None = None,
        state: str | None = None,
        updated_after: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 50,
    ) -> tuple[list[TaskRecord], int]:
        filters = {"tenant": tenant, "context_id": context_id, "state": state, "updated_after": updated_after}
        cursor = {"after_at": after[0] if after else None, "after_id": after[1] if after else None, "limit": limit}

        def read(conn: sqlite3.Connection) -> tuple[list[TaskRecord], int]:
            records = fetch_all(conn, TASK, Q["list_tasks"], {**filters, **cursor})
            return records, int(conn.execute(Q["count_tasks"], filters).fetchone()[0])

        return await self._read(read)

    async def list_task_messages(self, task_id: str) -> list[dict[str, Any]]:
        cached = self._tasks.get(task_id)
        if cached is not None:
            return list(cached.history)

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            return [orjson.loads(r[0]) for r in conn.execute(Q["list_task_messages"], (task_id,))]

        return await self._read(read)

    # file bytes --------------------------------------------------------------------------

    async def read_blobs(self, run_id: str, digests: Sequence[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        listed = orjson.dumps(list(digests)).decode()

        def read(conn: sqlite3.Connection) -> dict[str, bytes]:
            return {str(r[0]): bytes(r[1]) for r in conn.execute(Q["read_blobs"], (run_id, listed))}

        return await self._read(read)

    # push configs ------------------------------------------------------------------------

    async def put_push_config(self, row: PushConfigRow) -> None:
        self._push_tasks.add(row.task_id)
        await self._write(_writes.execute, Q["upsert_push_config"], PUSH_CONFIG.named(row))

    async def list_push_configs(self, task_id: str) -> list[PushConfigRow]:
        return await self._read(lambda conn: fetch_all(conn, PUSH_CONFIG, Q["list_push_configs"], (task_id,)))

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return await self._write(_writes.changed, Q["delete_push_config"], (task_id, config_id))

    # retention ---------------------------------------------------------------------------

    async def purge_runs(
        self, before: str, limit: int, *, tenant: str | None = None, dry_run: bool = False
    ) -> list[str]:
        ids: list[str] = await self._write(_writes.purge_runs, before, tenant, limit, dry_run)
        if not dry_run:
            for run_id in ids:  # here, in the event loop's thread, which alone touches the cache
                self._tasks.forget(run_id)
                self._push_tasks.discard(run_id)  # its push configs went with it
        return ids

    # webhooks ------------------------------------------------------------------------------

    async def put_webhook(self, row: WebhookRow) -> None:
        self._webhook_tenants.add(row.tenant)
        await self._write(_writes.put_webhook, row.tenant, WEBHOOK.named(row))

    async def get_webhook(self, webhook_id: str) -> WebhookRow | None:
        return await self._read(lambda conn: fetch_one(conn, WEBHOOK, Q["get_webhook"], (webhook_id,)))

    async def delete_webhook(self, tenant: str, webhook_id: str) -> bool:
        return await self._write(_writes.delete_webhook, tenant, webhook_id)

    # the outbox ----------------------------------------------------------------------------

    async def due_deliveries(
        self, now: str, limit: int, *, owner: str = "local", claim_seconds: float = 60.0
    ) -> list[DeliveryRow]:
        """Due stream heads, claimed in this process's memory: one host serves the file, and a
        SIGKILL, which loses the claims, also ends every attempt they stood for."""
        held = self._claims.held()
        rows = await self._read(lambda conn: fetch_all(conn, DELIVERY, Q["due_deliveries"], (now, held, limit)))
        self._claims.take([row.delivery_id for row in rows], claim_seconds)
        return rows

    async def next_delivery_at(self) -> str | None:
        held = self._claims.held()

        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(Q["next_delivery_at"], (held,)).fetchone()
            return None if row is None else str(row[0])

        return await self._read(read)

    async def release_claims(self, owner: str) -> None:
        """Nothing outlives this process's claims: they are in its memory."""

    async def record_attempts(self, attempts: Sequence[Attempt]) -> None:
        """Store many outcomes in one job of the group-commit writer, moving each finished
        stream's head on."""
        rows = [(a.status, a.attempts, a.next_attempt_at, a.last_error, a.now, a.delivery_id) for a in attempts]
        ids = orjson.dumps([a.delivery_id for a in attempts]).decode()
        await self._write(_writes.record_attempts, rows, ids)
        self._claims.release(a.delivery_id for a in attempts)

    async def record_attempt(
        self, delivery_id: str, *, status: str, attempts: int, next_attempt_at: str, last_error: str | None, now: str
    ) -> None:
        await self.record_attempts([Attempt(delivery_id, status, attempts, next_attempt_at, last_error, now)])

    async def list_deliveries(
        self, tenant: str | None, status: str | None, limit: int = 100, kind: str | None = None
    ) -> list[DeliveryRow]:
        clauses, params = [], []
        for column, value in (("tenant", tenant), ("status", status), ("kind", kind)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = f"SELECT {_DELIVERY_COLUMNS} FROM outbox {where} ORDER BY delivery_id DESC LIMIT ?"
        return await self._read(lambda conn: fetch_all(conn, DELIVERY, sql, [*params, limit]))

    async def redeliver(self, delivery_id: str, tenant: str | None, now: str) -> bool:
        return await self._write(_writes.redeliver, delivery_id, tenant, now)

    async def dead_letters(
        self, tenant: str, target_id: str, limit: int, before: str | None = None
    ) -> list[DeliveryRow]:
        params = (tenant, target_id, before, limit)
        return await self._read(lambda conn: fetch_all(conn, DELIVERY, Q["dead_letters"], params))

    # the effect ledger ---------------------------------------------------------------------

    async def claim_effect(self, claim: EffectClaim) -> int:
        return await self._write(_writes.claim_effect, effect_params(claim))

    async def settle_effect(self, effect_id: str, attempt: int, state: str) -> None:
        await self._write(_writes.execute, Q["settle_effect"], (effect_id, attempt, state))

    async def list_effects(self, run_id: str) -> list[EffectRecord]:
        return await self._read(lambda conn: [EffectRecord(*row) for row in conn.execute(Q["list_effects"], (run_id,))])

    async def purge_effects(self, before: str, limit: int) -> int:
        return await self._write(_writes.purge_effects, before, limit)

    # leases (one host: they are kept, but nobody else competes) -----------------------------

    async def claim_run(self, run_id: str, owner: str, ttl: float) -> int | None:
        params = {"run_id": run_id, "owner": owner, "expires_at": later_iso(ttl), "now": now_iso()}
        return await self._write(_writes.claim_run, params)

    async def renew_leases(self, owner: str, ttl: float) -> list[str]:
        return await self._write(_writes.renew_leases, later_iso(ttl), owner, now_iso())

    async def release_run(self, run_id: str, owner: str) -> None:
        await self._write(_writes.execute, Q["release_run"], (run_id, owner))

    async def orphaned_runs(self, now: str, limit: int) -> list[str]:
        return await self._read(lambda conn: [r[0] for r in conn.execute(Q["orphaned_runs"], (now, now_iso(), limit))])

    async def announce(self, run_id: str) -> None:
        """Nothing to do: one process, and its notifier is in memory."""

    def on_announce(self, callback: Callable[[str], None]) -> None:
        """Nothing ever arrives: no other host shares this file."""

    def on_hints_missed(self, callback: Callable[[], None]) -> None:
        """No hint can be missed: none is ever sent."""


if TYPE_CHECKING:

    def _implements_the_protocol(store: SqliteStore) -> Store:
        return store
