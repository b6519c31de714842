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
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Self, TypeVar

import orjson

from tether.errors import Conflict, SequenceConflict, StoreUnavailable
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
    RecordMap,
)
from tether.store.base import (
    Attempt,
    Commit,
    CredentialRow,
    DeliveryRow,
    EffectClaim,
    EffectRecord,
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
from tether.store.postgres._commit import Webhooks, claim_idempotency, write_blobs, write_extra
from tether.store.postgres._driver import Q, as_record, as_records, asyncpg, rows_affected, store_errors
from tether.store.postgres._group_commit import GroupCommit, Outcome, Rows, write_group
from tether.store.postgres._listen import Listener, Notifier
from tether.store.postgres._migrate import apply_migrations
from tether.store.postgres._task_reads import TaskReads

DEFAULT_MIN_SIZE = 2
DEFAULT_MAX_SIZE = 10
CLOSE_TIMEOUT = 10.0
R = TypeVar("R")


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """Hand a connection back to the pool as it is: no reset query, one round trip less per call.

    asyncpg's default reset (``RESET ALL``, ``UNLISTEN *``, advisory unlocks) costs a round
    trip on every release, a quarter of a ``tasks/get``'s. The pool's connections never
    change a setting, listen, or take a session lock (the listener and the notifier have
    connections of their own; migrations lock per transaction), and asyncpg still rolls
    back a transaction left open before this is called.
    """


#: what a purge deletes for each run, in this order (the run row last)
_PURGES = (
    Q["purge_run_events"],
    Q["purge_task_messages"],
    Q["purge_tasks"],
    Q["purge_push_configs"],
    Q["purge_deliveries"],
    Q["purge_idempotency"],
    Q["purge_leases"],
    Q["lock_purged_blobs"],
    Q["purge_blobs"],
    Q["purge_run_blobs"],
    Q["purge_runs"],
)


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
        self._tasks = TaskReads(self._current_tasks)
        self._group = GroupCommit(self._write_group)
        #: told how many commits each grouped statement made durable (metrics)
        self.on_group: Callable[[int], None] | None = None

    def __repr__(self) -> str:
        return f"PostgresStore(origin={self.origin!r}, state={self._state})"

    # lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect the pool and bring the schema up to date (migrations in order)."""
        if self._state != "unopened":
            raise RuntimeError(f"cannot open a store that is {self._state}")
        with store_errors("opening the store"):
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                server_settings={"application_name": "tether"},
                reset=_keep_session,
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
        await self._tasks.close()
        await self._group.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), CLOSE_TIMEOUT)
            except TimeoutError:
                pool.terminate()

    async def __aenter__(self) -> Self:
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
        async with self._connection(action) as conn, conn.transaction():
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

    async def _fetch_all(self, records: RecordMap[R], query: str, *args: Any) -> list[R]:
        return as_records(records, query, await self._fetch(query, *args))

    async def _fetch_one(self, records: RecordMap[R], query: str, *args: Any) -> R | None:
        return as_record(records, query, await self._fetchrow(query, *args))

    # runs and events -------------------------------------------------------------------

    async def commit(self, commit: Commit) -> int:
        """Write a transition, all of it or nothing; returns how many deliveries it enqueued.

        In one statement with the commits that arrive meanwhile when it can
        (``_group_commit``), else in a transaction of its own. Raises
        IdempotencyClaimed, LeaseLost or SequenceConflict, and then writes nothing.
        """
        hit("store.commit.before")
        rows = Rows.of(commit)
        if rows is not None:
            outcome = await self._group.commit(rows)
            if outcome == "conflict":
                raise SequenceConflict(commit.run.run_id)
            if outcome == "written":
                hit("store.commit.after")
                self._tasks.cache.committed(commit)
                return 0
        enqueued = await self._commit_in_transaction(commit)
        hit("store.commit.after")
        self._tasks.cache.committed(commit)
        return enqueued

    async def _write_group(self, group: list[Rows]) -> list[Outcome]:
        async with self._connection("committing runs") as conn:
            outcomes = await write_group(conn, group)
        if self.on_group is not None:
            self.on_group(len(group))
        return outcomes

    async def _commit_in_transaction(self, commit: Commit) -> int:
        """The commit step by step in one transaction: every refusal said precisely, any delivery enqueued."""
        run = commit.run
        async with self._transaction("committing a run") as conn:
            if commit.idempotency is not None:
                await claim_idempotency(conn, commit.idempotency)
            if commit.fence is not None:
                owner, epoch = commit.fence
                if await conn.fetchval(Q["check_fence"], run.run_id, owner, epoch) is None:
                    raise LeaseLost(f"run {run.run_id} is no longer leased to {owner} at epoch {epoch}")
            if commit.expected_sequence is None:
                if await conn.fetchval(Q["insert_run"], *RUN.values(run)) is None:
                    raise SequenceConflict(run.run_id)
            else:
                status = await conn.execute(
                    Q["update_run"],
                    run.run_id,
                    run.status,
                    run.last_sequence,
                    orjson.dumps(run.state),
                    run.updated_at,
                    run.due_at,
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
            if commit.blobs:
                await write_blobs(conn, run.run_id, commit.blobs, run.updated_at)
            enqueued = 0
            webhooks: Webhooks = {}
            for extra in commit.extras:
                enqueued += await write_extra(conn, extra, run.updated_at, webhooks)
            return enqueued

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRow | None:
        if tenant is None:
            return await self._fetch_one(RUN, "get_run", run_id)
        return await self._fetch_one(RUN, "get_run_for_tenant", run_id, tenant)

    async def list_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        workflow_id: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[RunRow]:
        return await self._fetch_all(RUN, "list_runs", tenant, status, workflow_id, before, limit)

    async def active_runs(self) -> list[RunRow]:
        return await self._fetch_all(RUN, "active_runs")

    async def read_events(self, run_id: str, after: int = -1, limit: int = 1000) -> list[EventRow]:
        return await self._fetch_all(EVENT, "read_events", run_id, after, limit)

    async def get_idempotency(self, tenant: str, scope: str, key: str) -> IdempotencyRecord | None:
        return await self._fetch_one(IDEMPOTENCY, "get_idempotency", tenant, scope, key)

    # keys --------------------------------------------------------------------------------

    async def insert_key(self, key: KeyRow) -> None:
        async with self._connection("inserting a key") as conn:
            inserted = await conn.fetchval(Q["insert_key"], *KEY.values(key))
        if inserted is None:
            raise Conflict(f"an active key named {key.name!r} already exists", code="key_exists")

    async def get_key(self, key_id: str) -> KeyRow | None:
        return await self._fetch_one(KEY, "get_key", key_id)

    async def list_keys(self) -> list[KeyRow]:
        return await self._fetch_all(KEY, "list_keys")

    async def revoke_key(self, name: str, revoked_at: str) -> bool:
        return await self._execute("revoke_key", revoked_at, name) > 0

    # outbound credentials ----------------------------------------------------------------

    async def insert_credential(self, row: CredentialRow) -> None:
        async with self._connection("storing a credential") as conn:
            inserted = await conn.fetchval(Q["insert_credential"], *CREDENTIAL.values(row))
        if inserted is None:
            raise Conflict(f"a credential named {row.name!r} already exists", code="credential_exists")

    async def get_credential(self, name: str) -> CredentialRow | None:
        return await self._fetch_one(CREDENTIAL, "get_credential", name)

    async def list_credentials(self) -> list[CredentialRow]:
        return await self._fetch_all(CREDENTIAL, "list_credentials")

    async def delete_credential(self, name: str) -> bool:
        return await self._execute("delete_credential", name) > 0

    # workflows ---------------------------------------------------------------------------

    async def put_workflow(self, row: WorkflowRow) -> bool:
        """Store a definition; returns False when the identical one was already there."""
        canonical = orjson.dumps(row.definition, option=orjson.OPT_SORT_KEYS)
        values = WORKFLOW.values(row)
        async with self._transaction("storing a workflow") as conn:
            if await conn.fetchval(Q["insert_workflow"], *values) is not None:
                return True
            existing = await conn.fetchval(Q["lock_workflow"], row.workflow_id)
            if existing is not None and orjson.dumps(orjson.loads(existing), option=orjson.OPT_SORT_KEYS) == canonical:
                return False
            await conn.execute(Q["update_workflow"], *values)
            return True

    async def list_workflows(self) -> list[WorkflowRow]:
        return await self._fetch_all(WORKFLOW, "list_workflows")

    async def claim_setting(self, name: str, value: str) -> str:
        async with self._transaction("writing") as conn:
            stored: str = await conn.fetchval(Q["claim_setting"], name, value)
            return stored

    async def settings_under(self, prefix: str) -> dict[str, str]:
        return {row["name"]: row["value"] for row in await self._fetch("settings_under", prefix)}

    # A2A tasks ---------------------------------------------------------------------------

    async def get_task(self, task_id: str, tenant: str | None = None) -> TaskRecord | None:
        if tenant is None:
            return await self._fetch_one(TASK, "get_task", task_id)
        return await self._fetch_one(TASK, "get_task_for_tenant", task_id, tenant)

    async def list_task_messages(self, task_id: str) -> list[dict[str, Any]]:
        return [orjson.loads(r[0]) for r in await self._fetch("list_task_messages", task_id)]

    async def read_task(
        self, task_id: str, tenant: str, *, history: bool = False
    ) -> tuple[TaskRecord, RunRow, list[dict[str, Any]] | None] | None:
        """The task as current as the database is when this is called (read-your-writes across
        hosts), from memory when that needs no round trip or one shared read (``_task_reads``)."""
        entry = await self._tasks.read(task_id)
        if entry is None or entry.run.tenant != tenant or entry.record.tenant != tenant:
            return None
        return entry.record, entry.run, list(entry.history) if history else None

    async def read_blobs(self, run_id: str, digests: Sequence[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        return {str(r[0]): bytes(r[1]) for r in await self._fetch("read_blobs", run_id, list(digests))}

    async def _current_tasks(self, task_ids: list[str], held: list[int]) -> list[Any]:
        async with self._connection("reading") as conn:
            rows: list[Any] = await conn.fetch(Q["current_tasks"], task_ids, held)
            return rows

    # push configs and webhooks -----------------------------------------------------------

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
        filters = (tenant, context_id, state, updated_after)
        cursor = (after[0], after[1]) if after else (None, None)
        records = await self._fetch_all(TASK, "list_tasks", *filters, *cursor, limit)
        counted = await self._fetchrow("count_tasks", *filters)
        return records, int(counted[0])

    async def put_push_config(self, row: PushConfigRow) -> None:
        await self._execute("upsert_push_config", *PUSH_CONFIG.values(row))

    async def list_push_configs(self, task_id: str) -> list[PushConfigRow]:
        return await self._fetch_all(PUSH_CONFIG, "list_push_configs", task_id)

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return await self._execute("delete_push_config", task_id, config_id) > 0

    async def put_webhook(self, row: WebhookRow) -> None:
        await self._execute("insert_webhook", *WEBHOOK.values(row))

    async def get_webhook(self, webhook_id: str) -> WebhookRow | None:
        return await self._fetch_one(WEBHOOK, "get_webhook", webhook_id)

    async def delete_webhook(self, tenant: str, webhook_id: str) -> bool:
        return await self._execute("delete_webhook", tenant, webhook_id) > 0

    # the outbox ----------------------------------------------------------------------------

    async def due_deliveries(
        self, now: str, limit: int, *, owner: str = "local", claim_seconds: float = 60.0
    ) -> list[DeliveryRow]:
        """Claim, for ``owner``, due deliveries that head their stream (SKIP LOCKED)."""
        return await self._fetch_all(DELIVERY, "due_deliveries", now, limit, owner, float(claim_seconds))

    async def next_delivery_at(self) -> str | None:
        row = await self._fetchrow("next_delivery_at")
        value: str | None = row[0]
        return value

    async def release_claims(self, owner: str) -> None:
        await self._execute("release_claims", owner)

    async def record_attempts(self, attempts: Sequence[Attempt]) -> None:
        """Store many outcomes in one transaction: the runs held against a racing enqueue, then
        one statement that records them and moves every finished stream's head on."""
        if not attempts:
            return
        ids = [a.delivery_id for a in attempts]
        async with self._transaction("writing") as conn:
            await conn.execute(Q["attempts_settings"])  # planned afresh, committed unflushed
            await conn.execute(Q["lock_attempt_runs"], ids)
            await conn.execute(
                Q["record_attempts"],
                ids,
                [a.status for a in attempts],
                [a.attempts for a in attempts],
                [a.next_attempt_at for a in attempts],
                [a.last_error for a in attempts],
                [a.now for a in attempts],
            )

    async def record_attempt(
        self, delivery_id: str, *, status: str, attempts: int, next_attempt_at: str, last_error: str | None, now: str
    ) -> None:
        await self.record_attempts([Attempt(delivery_id, status, attempts, next_attempt_at, last_error, now)])

    async def list_deliveries(
        self, tenant: str | None, status: str | None, limit: int = 100, kind: str | None = None
    ) -> list[DeliveryRow]:
        return await self._fetch_all(DELIVERY, "list_deliveries", tenant, status, limit, kind)

    async def redeliver(self, delivery_id: str, tenant: str | None, now: str) -> bool:
        return await self._execute("redeliver", delivery_id, tenant, now) > 0

    async def dead_letters(
        self, tenant: str, target_id: str, limit: int, before: str | None = None
    ) -> list[DeliveryRow]:
        return await self._fetch_all(DELIVERY, "dead_letters", tenant, target_id, before, limit)

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

    async def purge_runs(
        self, before: str, limit: int, *, tenant: str | None = None, dry_run: bool = False
    ) -> list[str]:
        async with self._transaction("purging runs") as conn:
            ids: list[str] = [r[0] for r in await conn.fetch(Q["purgeable_runs"], before, tenant, limit)]
            if ids and not dry_run:
                for statement in _PURGES:
                    await conn.execute(statement, ids)
        if ids and not dry_run:
            for run_id in ids:
                self._tasks.cache.forget(run_id)
                await self._notifier.send(run_id)  # the other hosts drop their copies too
        return ids

    # the effect ledger

    async def claim_effect(self, claim: EffectClaim) -> int:
        """Release the effect's unsettled attempts and claim the next; a claim that raced another for one
        number (the primary key refused it) is tried again after the other committed."""
        c = claim
        values = (c.tenant, c.run_id, c.node_id, c.seam, c.keying, c.provider_key, c.invocation_id, c.at)
        while True:
            async with self._transaction("claiming an effect") as conn:
                await conn.execute(Q["release_effect_claims"], c.effect_id)
                attempt = await conn.fetchval(Q["claim_effect"], c.effect_id, *values)
            if attempt is not None:
                return int(attempt)

    async def settle_effect(self, effect_id: str, attempt: int, state: str) -> None:
        await self._execute("settle_effect", effect_id, attempt, state)

    async def list_effects(self, run_id: str) -> list[EffectRecord]:
        return [EffectRecord(*row) for row in await self._fetch("list_effects", run_id)]

    async def purge_effects(self, before: str, limit: int) -> int:
        return await self._execute("purge_effects", before, limit)

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
        if not self._listener.wanted:
            # a hint about a task that had ended means another host purged it
            self._listener.add(self._tasks.cache.forget_final)
            self._listener.on_listening(self._tasks.cache.clear)  # hints missed while not listening
        self._listener.add(callback)
        if self._state == "open":
            self._listener.start()

    def on_hints_missed(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` each time the listener starts listening: hints sent before were missed."""
        self._listener.on_listening(callback)


if TYPE_CHECKING:

    def _implements_the_protocol(store: PostgresStore) -> Store:
        return store
