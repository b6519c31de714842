"""PostgreSQL store: the backend several hosts share.

Each call is one transaction on a pooled connection. The invariants live in the
database: a commit is a compare-and-swap on the run's ``last_sequence``, an idempotency
key is claimed by its primary key, a write made under an execution lease is fenced by
the lease's (owner, epoch), and a delivery is claimed by one host in one statement
(``FOR UPDATE SKIP LOCKED``). Hosts hint each other with LISTEN/NOTIFY (``_listen``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import orjson

from tether.errors import Conflict, SequenceConflict, StoreUnavailable
from tether.store.base import (
    Commit,
    DeliveryRow,
    EventRow,
    IdempotencyRecord,
    KeyRow,
    LeaseLost,
    PushConfigRow,
    RunRow,
    Store,
    TaskRecord,
    WebhookRow,
    WorkflowRow,
)
from tether.store.postgres import _rows
from tether.store.postgres._commit import claim_idempotency, write_extra
from tether.store.postgres._driver import Q, asyncpg, rows_affected, store_errors
from tether.store.postgres._listen import Listener, Notifier
from tether.store.postgres._migrate import apply_migrations

DEFAULT_MIN_SIZE = 2
DEFAULT_MAX_SIZE = 10
CLOSE_TIMEOUT = 10.0


class PostgresStore:
    """The scale-out store: several hosts, one PostgreSQL database.

    Parameters
    ----------
    dsn:
        A libpq connection URL, ``postgresql://user@host:port/database``.
    min_size, max_size:
        Bounds of the connection pool (the listener and the notifier hold one more
        connection each, outside the pool, once they are used).
    """

    shared = True

    def __init__(self, dsn: str, *, min_size: int = DEFAULT_MIN_SIZE, max_size: int = DEFAULT_MAX_SIZE) -> None:
        self.dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._state = "unopened"
        self._pool: asyncpg.Pool | None = None
        #: tells this store's own hints from the other hosts' ones
        self.origin = uuid.uuid4().hex
        self._notifier = Notifier(dsn, self.origin)
        self._listener = Listener(dsn, self.origin)

    def __repr__(self) -> str:
        return f"PostgresStore(origin={self.origin!r}, state={self._state})"

    # lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect the pool and bring the schema up to date (migrations in order)."""
        if self._state != "unopened":
            raise RuntimeError(f"cannot open a store that is {self._state}")
        with store_errors("opening the store"):
            pool = await asyncpg.create_pool(
                self.dsn, min_size=self._min_size, max_size=self._max_size, server_settings={"application_name": "tether"}
            )
            try:
                async with pool.acquire() as conn:
                    await apply_migrations(conn)
            except BaseException:
                pool.terminate()
                raise
        self._pool = pool
        self._state = "open"
        if self._listener.wanted:
            self._listener.start()

    async def close(self) -> None:
        """Stop listening and close every connection; safe to call more than once."""
        previous, self._state = self._state, "closed"
        if previous != "open":
            return
        await self._listener.close()
        await self._notifier.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), CLOSE_TIMEOUT)
            except TimeoutError:
                pool.terminate()

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def _connection(self, action: str) -> AsyncIterator[asyncpg.Connection]:
        if self._state != "open" or self._pool is None:
            raise StoreUnavailable(f"the store is {self._state}")
        with store_errors(action):
            async with self._pool.acquire() as conn:
                yield conn

    @asynccontextmanager
    async def _transaction(self, action: str) -> AsyncIterator[asyncpg.Connection]:
        async with self._connection(action) as conn:
            async with conn.transaction():
                yield conn

    async def _fetch(self, query: str, *args: Any) -> list[Any]:
        async with self._connection("reading") as conn:
            rows: list[Any] = await conn.fetch(Q[query], *args)
            return rows

    async def _fetchrow(self, query: str, *args: Any) -> Any:
        async with self._connection("reading") as conn:
            return await conn.fetchrow(Q[query], *args)

    async def _execute(self, query: str, *args: Any) -> int:
        async with self._connection("writing") as conn:
            return rows_affected(await conn.execute(Q[query], *args))

    # runs and events -------------------------------------------------------------------

    async def commit(self, commit: Commit) -> int:
        """Write a transition in one transaction; returns how many deliveries it enqueued.

        Raises IdempotencyClaimed, LeaseLost or SequenceConflict, and then writes nothing.
        """
        run = commit.run
        state = orjson.dumps(run.state)
        async with self._transaction("committing a run") as conn:
            if commit.idempotency is not None:
                await claim_idempotency(conn, commit.idempotency)
            if commit.fence is not None:
                owner, epoch = commit.fence
                if await conn.fetchval(Q["check_fence"], run.run_id, owner, epoch) is None:
                    raise LeaseLost(f"run {run.run_id} is no longer leased to {owner} at epoch {epoch}")
            if commit.expected_sequence is None:
                created = await conn.fetchval(
                    Q["insert_run"], run.run_id, run.tenant, run.workflow_id, run.status, run.last_sequence, state,
                    run.created_at, run.updated_at, run.due_at,
                )
                if created is None:
                    raise SequenceConflict(run.run_id)
            else:
                status = await conn.execute(
                    Q["update_run"], run.run_id, run.status, run.last_sequence, state, run.updated_at, run.due_at,
                    commit.expected_sequence,
                )
                if rows_affected(status) != 1:
                    raise SequenceConflict(run.run_id)
            if commit.events:
                await conn.execute(
                    Q["insert_events"],
                    [e.run_id for e in commit.events],
                    [e.sequence for e in commit.events],
                    [e.doc_json for e in commit.events],
                )
            enqueued = 0
            for extra in commit.extras:
                enqueued += await write_extra(conn, extra, run.updated_at)
            return enqueued

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRow | None:
        if tenant is None:
            row = await self._fetchrow("get_run", run_id)
        else:
            row = await self._fetchrow("get_run_for_tenant", run_id, tenant)
        return None if row is None else _rows.run_row(row)

    async def list_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        workflow_id: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[RunRow]:
        return [_rows.run_row(r) for r in await self._fetch("list_runs", tenant, status, workflow_id, before, limit)]

    async def active_runs(self) -> list[RunRow]:
        return [_rows.run_row(r) for r in await self._fetch("active_runs")]

    async def read_events(self, run_id: str, after: int = -1, limit: int = 1000) -> list[EventRow]:
        return [EventRow(r[0], r[1], bytes(r[2])) for r in await self._fetch("read_events", run_id, after, limit)]

    async def get_idempotency(self, tenant: str, scope: str, key: str) -> IdempotencyRecord | None:
        row = await self._fetchrow("get_idempotency", tenant, scope, key)
        return None if row is None else _rows.idempotency_row(row)

    # keys --------------------------------------------------------------------------------

    async def insert_key(self, key: KeyRow) -> None:
        async with self._connection("inserting a key") as conn:
            inserted = await conn.fetchval(
                Q["insert_key"], key.key_id, key.name, key.tenant, _rows.json_text(key.scopes), key.secret_hash,
                key.created_at, key.revoked_at,
            )
        if inserted is None:
            raise Conflict(f"an active key named {key.name!r} already exists", code="key_exists")

    async def get_key(self, key_id: str) -> KeyRow | None:
        row = await self._fetchrow("get_key", key_id)
        return None if row is None else _rows.key_row(row)

    async def list_keys(self) -> list[KeyRow]:
        return [_rows.key_row(r) for r in await self._fetch("list_keys")]

    async def revoke_key(self, name: str, revoked_at: str) -> bool:
        return await self._execute("revoke_key", revoked_at, name) > 0

    # workflows ---------------------------------------------------------------------------

    async def put_workflow(self, row: WorkflowRow) -> bool:
        """Store a definition; returns False when the identical one was already there."""
        canonical = orjson.dumps(row.definition, option=orjson.OPT_SORT_KEYS)
        stored = orjson.dumps(row.definition)
        async with self._transaction("storing a workflow") as conn:
            if await conn.fetchval(Q["insert_workflow"], row.workflow_id, stored, row.source, row.updated_at) is not None:
                return True
            existing = await conn.fetchval(Q["lock_workflow"], row.workflow_id)
            if existing is not None and orjson.dumps(orjson.loads(existing), option=orjson.OPT_SORT_KEYS) == canonical:
                return False
            await conn.execute(Q["update_workflow"], row.workflow_id, stored, row.source, row.updated_at)
            return True

    async def list_workflows(self) -> list[WorkflowRow]:
        return [WorkflowRow(r[0], orjson.loads(r[1]), r[2], r[3]) for r in await self._fetch("list_workflows")]

    async def claim_setting(self, name: str, value: str) -> str:
        async with self._transaction("writing") as conn:
            stored: str = await conn.fetchval(Q["claim_setting"], name, value)
            return stored

    # A2A tasks ---------------------------------------------------------------------------

    async def get_task(self, task_id: str, tenant: str | None = None) -> TaskRecord | None:
        if tenant is None:
            row = await self._fetchrow("get_task", task_id)
        else:
            row = await self._fetchrow("get_task_for_tenant", task_id, tenant)
        return None if row is None else _rows.task_row(row)

    async def list_task_messages(self, task_id: str) -> list[dict[str, Any]]:
        return [orjson.loads(r[0]) for r in await self._fetch("list_task_messages", task_id)]

    async def read_task(
        self, task_id: str, tenant: str, *, history: bool = False
    ) -> tuple[TaskRecord, RunRow, list[dict[str, Any]] | None] | None:
        async with self._connection("reading") as conn:
            task = await conn.fetchrow(Q["get_task_for_tenant"], task_id, tenant)
            run = await conn.fetchrow(Q["get_run_for_tenant"], task_id, tenant) if task is not None else None
            if task is None or run is None:
                return None
            messages = [orjson.loads(r[0]) for r in await conn.fetch(Q["list_task_messages"], task_id)] if history else None
            return _rows.task_row(task), _rows.run_row(run), messages

    # push configs and webhooks -----------------------------------------------------------

    async def put_push_config(self, row: PushConfigRow) -> None:
        await self._execute("upsert_push_config", *_rows.push_params(row))

    async def list_push_configs(self, task_id: str) -> list[PushConfigRow]:
        return [_rows.push_row(r) for r in await self._fetch("list_push_configs", task_id)]

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return await self._execute("delete_push_config", task_id, config_id) > 0

    async def put_webhook(self, row: WebhookRow) -> None:
        await self._execute("insert_webhook", *_rows.webhook_params(row))

    async def get_webhook(self, webhook_id: str) -> WebhookRow | None:
        row = await self._fetchrow("get_webhook", webhook_id)
        return None if row is None else _rows.webhook_row(row)

    async def delete_webhook(self, tenant: str, webhook_id: str) -> bool:
        return await self._execute("delete_webhook", tenant, webhook_id) > 0

    # the outbox ----------------------------------------------------------------------------

    async def due_deliveries(
        self, now: str, limit: int, *, owner: str = "local", claim_seconds: float = 60.0
    ) -> list[DeliveryRow]:
        """Claim, for ``owner``, due deliveries that head their stream (SKIP LOCKED)."""
        rows = await self._fetch("due_deliveries", now, limit, owner, float(claim_seconds))
        return [_rows.delivery_row(r) for r in rows]

    async def next_delivery_at(self) -> str | None:
        row = await self._fetchrow("next_delivery_at")
        value: str | None = row[0]
        return value

    async def record_attempt(
        self, delivery_id: str, *, status: str, attempts: int, next_attempt_at: str, last_error: str | None, now: str
    ) -> None:
        """Store an attempt's outcome and end its claim; a final push that is done
        discards its config's secrets."""
        await self._execute("record_attempt", status, attempts, next_attempt_at, last_error, now, delivery_id)

    async def list_deliveries(self, tenant: str | None, status: str | None, limit: int = 100) -> list[DeliveryRow]:
        return [_rows.delivery_row(r) for r in await self._fetch("list_deliveries", tenant, status, limit)]

    async def redeliver(self, delivery_id: str, tenant: str | None, now: str) -> bool:
        return await self._execute("redeliver", delivery_id, tenant, now) > 0

    # several hosts -------------------------------------------------------------------------

    async def claim_run(self, run_id: str, owner: str, ttl: float) -> int | None:
        """Take the execution lease of a run, or keep it; None while another host holds it."""
        async with self._connection("claiming a run") as conn:
            epoch: int | None = await conn.fetchval(Q["claim_run"], run_id, owner, float(ttl))
            return epoch

    async def renew_leases(self, owner: str, ttl: float) -> list[str]:
        """Extend every live lease ``owner`` holds; returns the run ids it still holds."""
        return sorted(r[0] for r in await self._fetch("renew_leases", owner, float(ttl)))

    async def release_run(self, run_id: str, owner: str) -> None:
        await self._execute("release_run", run_id, owner)

    async def orphaned_runs(self, now: str, limit: int) -> list[str]:
        """Runs that need a host and have no live lease, by run id."""
        return [r[0] for r in await self._fetch("orphaned_runs", now, limit)]

    async def announce(self, run_id: str) -> None:
        """Hint the other hosts that ``run_id`` changed; a hint that cannot be sent is
        logged and dropped (they poll)."""
        if self._state != "open":
            raise StoreUnavailable(f"the store is {self._state}")
        await self._notifier.send(run_id)

    def on_announce(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(run_id)`` for each hint another host sends.

        The first call starts the listener (at ``open`` when the store is not open yet).
        """
        self._listener.add(callback)
        if self._state == "open":
            self._listener.start()


if TYPE_CHECKING:

    def _implements_the_protocol(store: PostgresStore) -> Store:
        return store
