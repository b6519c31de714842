"""SQLite store: WAL, fsync'd commits, one writer thread that groups commits.

Every write is a job handed to the writer thread. The thread takes all jobs waiting in
its queue, runs them in one transaction and commits once, so many concurrent requests
share one fsync (group commit); the new rows of all its commits go in with one INSERT
per table. A job that fails (a lost compare-and-swap, a claimed idempotency key) writes
nothing and costs the others nothing: the batch runs again, each job in its own
savepoint. Reads run on a small pool of reader connections, which WAL lets run
beside the writer.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from datetime import timedelta

import orjson

from tether.clock import iso, now
from tether.errors import Conflict, SequenceConflict, StoreUnavailable
from tether.store._task_cache import TaskCache, TaskEntry
from tether.store.fanout import push_stream_task
from tether.store.fanout import targets as fanout_targets
from tether.store._queries import load_queries
from tether.store.sqlite import _rows
from tether.store.base import (
    Commit,
    EventRow,
    IdempotencyClaimed,
    IdempotencyRecord,
    KeyRow,
    DeliveryRow,
    Fanout,
    LeaseLost,
    PushConfigRow,
    RunRow,
    TaskMessage,
    TaskRecord,
    WebhookRow,
    WorkflowRow,
)
from tether.ids import new_id

_HERE = Path(__file__).parent
Q = load_queries(_HERE / "queries.sql")
MIGRATIONS_DIR = _HERE / "migrations"
T = TypeVar("T")
_STOP = object()
_MAX_BATCH = 512


class StoreInUse(Exception):
    """Another host process serves this SQLite file."""


def _connect(path: Path) -> sqlite3.Connection:
    # cached_statements: the writer's multi-row INSERTs come in many row counts (see _rows)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0, cached_statements=256)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _statements(script: str) -> list[str]:
    """A migration's statements: comment lines dropped, split at semicolons."""
    text = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("--"))
    return [statement.strip() for statement in text.split(";") if statement.strip()]


def apply_migrations(conn: sqlite3.Connection) -> list[int]:
    """Apply numbered migrations not yet applied; returns the versions applied now.

    The whole check-and-apply runs under one write lock, so two processes opening a
    new file at once (``tether serve`` and ``tether keys create``) apply each once.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    applied = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for file in sorted(MIGRATIONS_DIR.glob("*.sql")):
            version = int(file.name.split("_", 1)[0])
            if version in done:
                continue
            for statement in _statements(file.read_text(encoding="utf-8")):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, datetime('now'))", (version,))
            applied.append(version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied


class _Job:
    """A write for the writer thread: ``fn`` does it alone; a commit also has ``prepare``,
    which does what cannot wait and leaves its rows to be inserted with the batch's."""

    __slots__ = ("fn", "prepare", "future", "loop")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        prepare: Callable[[sqlite3.Connection], _rows.Rows] | None,
        future: asyncio.Future[Any],
        loop: asyncio.AbstractEventLoop,
    ):
        self.fn = fn
        self.prepare = prepare
        self.future = future
        self.loop = loop


def _settle(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Resolve a batch's futures of one event loop (called in that loop, once per batch)."""
    for future, result, error in outcomes:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


def _run_row(row: tuple[Any, ...]) -> RunRow:
    return RunRow(row[0], row[1], row[2], row[3], row[4], orjson.loads(row[5]), row[6], row[7], row[8])


def _key_row(row: tuple[Any, ...]) -> KeyRow:
    return KeyRow(row[0], row[1], row[2], orjson.loads(row[3]), row[4], row[5], row[6])


def _push_row(row: tuple[Any, ...]) -> PushConfigRow:
    return PushConfigRow(row[0], row[1], row[2], row[3], row[4], row[5], orjson.loads(row[6]), row[7], row[8])


def _push_params(row: PushConfigRow) -> dict[str, Any]:
    return {
        "task_id": row.task_id,
        "config_id": row.config_id,
        "tenant": row.tenant,
        "url": row.url,
        "token_fingerprint": row.token_fingerprint,
        "token_secret": row.token_secret,
        "auth_schemes": orjson.dumps(row.auth_schemes).decode(),
        "auth_secret": row.auth_secret,
        "created_at": row.created_at,
    }


def _webhook_row(row: tuple[Any, ...]) -> WebhookRow:
    return WebhookRow(row[0], row[1], row[2], orjson.loads(row[3]), orjson.loads(row[4]), row[5], row[6], row[7])


def _delivery_row(row: tuple[Any, ...]) -> DeliveryRow:
    return DeliveryRow(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], bytes(row[8]), bool(row[9]),
        row[10], row[11], row[12], row[13], row[14], row[15],
    )


def _fan_out(
    conn: sqlite3.Connection,
    fanout: Fanout,
    now: str,
    webhooks: dict[str, list[WebhookRow]],
    new_configs: list[tuple[str, str]] | None,
    rows: _rows.Rows,
) -> int:
    """Add one outbox row to ``rows`` per subscriber that matches (read inside the
    caller's transaction); how many.

    ``webhooks``: each tenant's webhooks as the writer last read them (kept by the store),
    filled here when a tenant's are not known. ``new_configs``: when the commit creates the run, its
    task's push configs are those the commit itself registers (as config id, url): a
    config can only be set on a task that exists.
    """
    configs: list[tuple[str, str]] = []
    if fanout.kind == "a2a-push":
        configs = new_configs if new_configs is not None else [(r[1], r[3]) for r in conn.execute(Q["list_push_configs"], (fanout.task_id,))]
    hooks: list[WebhookRow] = []
    if fanout.kind == "webhook":
        if fanout.tenant not in webhooks:
            webhooks[fanout.tenant] = [_webhook_row(r) for r in conn.execute(Q["tenant_webhooks"], (fanout.tenant,))]
        hooks = webhooks[fanout.tenant]
    found = fanout_targets(fanout, configs, hooks)
    body = fanout.rendered() if found else b""
    for target_id, stream_key, url in found:
        rows.add(
            _rows.OUTBOX,
            (new_id("dlv_"), fanout.tenant, fanout.kind, target_id, stream_key, fanout.run_id, fanout.sequence, url, body,
             int(fanout.final), "pending", 0, now, None, now, now),
        )
    return len(found)


def _idem_row(row: tuple[Any, ...]) -> IdempotencyRecord:
    return IdempotencyRecord(row[0], row[1], row[2], row[3], row[4], row[5], orjson.loads(row[6]), row[7])


def _now() -> str:
    return iso(now())


def _later(seconds: float) -> str:
    return iso(now() + timedelta(seconds=seconds))


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
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        #: every commit passes through this process, so the tasks it read or wrote lately are kept
        self._tasks = TaskCache()
        #: each tenant's webhooks as the writer last read them (writer thread only): a
        #: webhook write forgets its tenant's, a transaction that does not commit all
        self._webhooks: dict[str, list[WebhookRow]] = {}
        self._host_lock: int | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r}, state={self._state})"

    # lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        if self._state != "unopened":
            raise RuntimeError(f"cannot open a store that is {self._state}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = _connect(self.path)
        apply_migrations(conn)
        ready = threading.Event()
        self._writer = threading.Thread(target=self._write_loop, args=(conn, ready), name="tether-sqlite-writer", daemon=True)
        self._writer.start()
        ready.wait()
        self._pool = ThreadPoolExecutor(max_workers=self._readers, thread_name_prefix="tether-sqlite-reader")
        self._state = "open"

    def serve(self) -> None:
        """Claim the file for this host: a SQLite store serves one host process at a time.

        The host answers reads from memory because every commit passes through it; a
        second host on the same file would break that, so it is refused here, and the
        lock ends with the process (or at ``close``).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)  # a first start makes its data directory
        lock_path = self.path.with_name(self.path.name + ".host-lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreInUse(
                f"another Tether host is serving {self.path}: a SQLite store serves one host; "
                "stop that one, give this one another --data-dir, or share a PostgreSQL database (--database-url)"
            ) from None
        self._host_lock = fd

    async def close(self) -> None:
        if self._host_lock is not None:
            os.close(self._host_lock)
            self._host_lock = None
        if self._state != "open":
            self._state = "closed"
            return
        self._state = "closed"
        self._tasks = TaskCache()
        self._queue.put(_STOP)
        if self._writer is not None:
            await asyncio.to_thread(self._writer.join)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        with self._conns_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()

    async def __aenter__(self) -> SqliteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # the writer ------------------------------------------------------------------------

    def _write_loop(self, conn: sqlite3.Connection, ready: threading.Event) -> None:
        ready.set()
        try:
            while True:
                first = self._queue.get()
                if first is _STOP:
                    return
                batch: list[_Job] = [first]
                stop = False
                while len(batch) < _MAX_BATCH:
                    try:
                        job = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if job is _STOP:
                        stop = True
                        break
                    batch.append(job)
                self._write_batch(conn, batch)
                if stop:
                    return
        finally:
            conn.close()

    def _write_batch(self, conn: sqlite3.Connection, batch: list[_Job]) -> None:
        """One transaction, one fsync, for every job of the batch.

        The jobs run back to back first, the new rows of all commits inserted together
        (see ``_rows``). Only if a job refuses (a conflict, a duplicate) is the transaction
        undone and the batch run again, each job alone in its own savepoint, so that one
        refusal undoes nothing else and is reported precisely. Savepoints cost two
        statements per job, and each statement hands the GIL to the event loop and waits
        to get it back: that wait, not SQLite, had bounded the writer.
        """
        try:
            outcomes = self._transaction(conn, batch, isolated=len(batch) == 1)
            if outcomes is None:
                outcomes = self._transaction(conn, batch, isolated=True)
        except sqlite3.Error as exc:
            self._rollback(conn)
            failure = StoreUnavailable(f"SQLite write failed: {exc}")
            failure.__cause__ = exc
            outcomes = [(None, failure) for _ in batch]
        settled: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        for job, (result, error) in zip(batch, outcomes):
            settled.setdefault(job.loop, []).append((job.future, result, error))
        for loop, results in settled.items():  # one wake-up of each loop per batch, not one per job
            loop.call_soon_threadsafe(_settle, results)

    def _transaction(self, conn: sqlite3.Connection, batch: list[_Job], *, isolated: bool) -> list[tuple[Any, BaseException | None]] | None:
        """Run the jobs in one transaction and commit it.

        ``isolated``: each job alone (``fn``) in its own savepoint (a lone job needs none),
        so a refusal is that job's outcome. Otherwise commits are grouped, and a refusal
        undoes everything and answers None: the batch must run again, isolated.
        """
        conn.execute("BEGIN IMMEDIATE")
        outcomes: list[tuple[Any, BaseException | None]] = []
        grouped: list[_rows.Rows] = []
        savepoints = isolated and len(batch) > 1
        try:
            for job in batch:
                if not isolated and job.prepare is not None:
                    prepared = job.prepare(conn)
                    grouped.append(prepared)
                    outcomes.append((prepared.enqueued, None))
                    continue
                if grouped:  # a write that is not a commit sees the commits before it
                    _rows.insert(conn, grouped)
                    grouped = []
                if savepoints:
                    conn.execute("SAVEPOINT job")
                try:
                    outcomes.append((job.fn(conn), None))
                except Exception as exc:
                    if not isolated:
                        raise
                    if savepoints:
                        conn.execute("ROLLBACK TO job")
                    outcomes.append((None, exc))
                if savepoints:
                    conn.execute("RELEASE job")
            if grouped:
                _rows.insert(conn, grouped)
        except Exception:
            if isolated:
                raise
            self._rollback(conn)
            return None
        if isolated and not savepoints and outcomes[0][1] is not None:
            self._rollback(conn)  # the lone job refused: nothing of it is kept
            return outcomes
        conn.execute("COMMIT")
        return outcomes

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """Undo the open transaction, and forget what it may have read of its own writes."""
        self._webhooks.clear()
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    async def _write(self, fn: Callable[[sqlite3.Connection], T], prepare: Callable[[sqlite3.Connection], _rows.Rows] | None = None) -> T:
        if self._state != "open":
            raise StoreUnavailable(f"the store is {self._state}")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Job(fn, prepare, future, loop))
        return await future

    # readers ---------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path)
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
        run = commit.run
        state = orjson.dumps(run.state)
        rows = _rows.Rows()
        claim = commit.idempotency
        claim_row = None
        if claim is not None:
            claim_row = (claim.tenant, claim.scope, claim.key, claim.request_digest, claim.run_id, claim.status_code, orjson.dumps(claim.body), claim.created_at)
        creates = commit.expected_sequence is None
        if creates:
            rows.add(_rows.RUNS, (run.run_id, run.tenant, run.workflow_id, run.status, run.last_sequence, state, run.created_at, run.updated_at, run.due_at))
        for e in commit.events:
            rows.add(_rows.EVENTS, (e.run_id, e.sequence, e.doc_json))
        later: list[PushConfigRow | Fanout] = []  # written by the writer: they read, or must be read
        for extra in commit.extras:
            if isinstance(extra, TaskRecord):
                rows.add(_rows.TASKS, (extra.task_id, extra.tenant, extra.principal, extra.context_id, orjson.dumps(extra.record), extra.updated_at))
            elif isinstance(extra, TaskMessage):
                rows.add(_rows.MESSAGES, (extra.task_id, extra.message_id, orjson.dumps(extra.message), extra.created_at))
            elif isinstance(extra, (PushConfigRow, Fanout)):
                later.append(extra)
            else:
                raise TypeError(f"unknown commit extra {type(extra).__name__}")
        # A push config can only be set on a task that exists: the task of a run this commit
        # creates has only those the commit itself registers, and nothing needs to be read.
        new_configs = [(x.config_id, x.url) for x in later if isinstance(x, PushConfigRow) and x.task_id == run.run_id] if creates else None

        def unclaimed(conn: sqlite3.Connection) -> _rows.Rows:
            """Run what cannot wait for the inserts; the commit's rows but its claim, with its deliveries."""
            if commit.fence is not None:
                owner, epoch = commit.fence
                if conn.execute(Q["check_fence"], (run.run_id, owner, epoch, _now())).fetchone() is None:
                    raise LeaseLost(run.run_id)
            if not creates:
                update = {
                    "status": run.status,
                    "last_sequence": run.last_sequence,
                    "state": state,
                    "updated_at": run.updated_at,
                    "due_at": run.due_at,
                    "run_id": run.run_id,
                    "expected_sequence": commit.expected_sequence,
                }
                if conn.execute(Q["update_run"], update).rowcount != 1:
                    raise SequenceConflict(run.run_id)
            prepared = rows.copy()
            for extra in later:
                if isinstance(extra, PushConfigRow):
                    conn.execute(Q["upsert_push_config"], _push_params(extra))
                else:
                    known = new_configs if extra.task_id == run.run_id else None
                    prepared.enqueued += _fan_out(conn, extra, run.updated_at, self._webhooks, known, prepared)
            return prepared

        def prepare(conn: sqlite3.Connection) -> _rows.Rows:
            """The commit's rows, its claim among them, for the batch's inserts."""
            prepared = unclaimed(conn)
            if claim_row is not None:
                prepared.add(_rows.IDEMPOTENCY, claim_row)
            return prepared

        def write(conn: sqlite3.Connection) -> int:
            """The commit on its own: every refusal said precisely, the claim checked first."""
            if claim is not None:
                if conn.execute(_rows.IDEMPOTENCY.sql(1), claim_row).rowcount != 1:
                    existing = conn.execute(Q["get_idempotency"], (claim.tenant, claim.scope, claim.key)).fetchone()
                    raise IdempotencyClaimed(_idem_row(existing))
            prepared = unclaimed(conn)
            try:
                _rows.insert(conn, [prepared])
            except _rows.Refused as refused:
                if refused.table is _rows.RUNS:
                    raise SequenceConflict(run.run_id) from refused  # a run with this id exists already
                if refused.table is _rows.MESSAGES:
                    messages = [x for x in commit.extras if isinstance(x, TaskMessage)]
                    names = ", ".join(repr(m.message_id) for m in messages)
                    raise Conflict(f"message {names} is already in the history of task {messages[0].task_id!r}", code="message_already_recorded") from refused
                raise refused.__cause__ or refused
            return prepared.enqueued

        enqueued = await self._write(write, prepare)
        self._tasks.committed(commit)
        return enqueued

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRow | None:
        cached = self._tasks.get(run_id)
        if cached is not None:
            return cached.run if tenant in (None, cached.run.tenant) else None

        def read(conn: sqlite3.Connection) -> RunRow | None:
            if tenant is None:
                row = conn.execute(Q["get_run"], (run_id,)).fetchone()
            else:
                row = conn.execute(Q["get_run_for_tenant"], (run_id, tenant)).fetchone()
            return None if row is None else _run_row(row)

        return await self._read(read)

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
        sql = (
            "SELECT run_id, tenant, workflow_id, status, last_sequence, state, created_at, updated_at, due_at FROM runs "
            f"WHERE {' AND '.join(clauses)} ORDER BY run_id DESC LIMIT ?"
        )
        return await self._read(lambda conn: [_run_row(r) for r in conn.execute(sql, params)])

    async def active_runs(self) -> list[RunRow]:
        return await self._read(lambda conn: [_run_row(r) for r in conn.execute(Q["active_runs"])])

    async def read_events(self, run_id: str, after: int = -1, limit: int = 1000) -> list[EventRow]:
        def read(conn: sqlite3.Connection) -> list[EventRow]:
            return [EventRow(r[0], r[1], bytes(r[2])) for r in conn.execute(Q["read_events"], (run_id, after, limit))]

        return await self._read(read)

    # idempotency -----------------------------------------------------------------------

    async def get_idempotency(self, tenant: str, scope: str, key: str) -> IdempotencyRecord | None:
        def read(conn: sqlite3.Connection) -> IdempotencyRecord | None:
            row = conn.execute(Q["get_idempotency"], (tenant, scope, key)).fetchone()
            return None if row is None else _idem_row(row)

        return await self._read(read)

    # keys --------------------------------------------------------------------------------

    async def insert_key(self, key: KeyRow) -> None:
        params = {
            "key_id": key.key_id,
            "name": key.name,
            "tenant": key.tenant,
            "scopes": orjson.dumps(key.scopes).decode(),
            "secret_hash": key.secret_hash,
            "created_at": key.created_at,
            "revoked_at": key.revoked_at,
        }

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(Q["insert_key"], params)

        try:
            await self._write(write)
        except sqlite3.IntegrityError as exc:
            raise Conflict(f"an active key named {key.name!r} already exists", code="key_exists") from exc

    async def get_key(self, key_id: str) -> KeyRow | None:
        def read(conn: sqlite3.Connection) -> KeyRow | None:
            row = conn.execute(Q["get_key"], (key_id,)).fetchone()
            return None if row is None else _key_row(row)

        return await self._read(read)

    async def list_keys(self) -> list[KeyRow]:
        return await self._read(lambda conn: [_key_row(r) for r in conn.execute(Q["list_keys"])])

    async def revoke_key(self, name: str, revoked_at: str) -> bool:
        return await self._write(lambda conn: conn.execute(Q["revoke_key"], (revoked_at, name)).rowcount > 0)

    # workflows ---------------------------------------------------------------------------

    async def put_workflow(self, row: WorkflowRow) -> bool:
        definition = orjson.dumps(row.definition, option=orjson.OPT_SORT_KEYS)

        def write(conn: sqlite3.Connection) -> bool:
            existing = conn.execute(Q["get_workflow"], (row.workflow_id,)).fetchone()
            if existing is not None and orjson.dumps(orjson.loads(existing[1]), option=orjson.OPT_SORT_KEYS) == definition:
                return False
            conn.execute(
                Q["upsert_workflow"],
                {"workflow_id": row.workflow_id, "definition": orjson.dumps(row.definition), "source": row.source, "updated_at": row.updated_at},
            )
            return True

        return await self._write(write)

    async def list_workflows(self) -> list[WorkflowRow]:
        def read(conn: sqlite3.Connection) -> list[WorkflowRow]:
            return [WorkflowRow(r[0], orjson.loads(r[1]), r[2], r[3]) for r in conn.execute(Q["list_workflows"])]

        return await self._read(read)

    async def claim_setting(self, name: str, value: str) -> str:
        def write(conn: sqlite3.Connection) -> str:
            conn.execute(Q["claim_setting"], (name, value))
            stored: str = conn.execute(Q["get_setting"], (name,)).fetchone()[0]
            return stored

        return await self._write(write)

    # A2A tasks ---------------------------------------------------------------------------

    async def get_task(self, task_id: str, tenant: str | None = None) -> TaskRecord | None:
        def read(conn: sqlite3.Connection) -> TaskRecord | None:
            if tenant is None:
                row = conn.execute(Q["get_task"], (task_id,)).fetchone()
            else:
                row = conn.execute(Q["get_task_for_tenant"], (task_id, tenant)).fetchone()
            return None if row is None else TaskRecord(row[0], row[1], row[2], row[3], orjson.loads(row[4]), row[5])

        return await self._read(read)

    async def read_task(
        self, task_id: str, tenant: str, *, history: bool = False
    ) -> tuple[TaskRecord, RunRow, list[dict[str, Any]] | None] | None:
        cached = self._tasks.get(task_id)
        if cached is None:
            commits = self._tasks.commits

            def read(conn: sqlite3.Connection) -> TaskEntry | None:
                task = conn.execute(Q["get_task_for_tenant"], (task_id, tenant)).fetchone()
                run = conn.execute(Q["get_run_for_tenant"], (task_id, tenant)).fetchone() if task is not None else None
                if task is None or run is None:
                    return None
                messages = tuple(orjson.loads(r[0]) for r in conn.execute(Q["list_task_messages"], (task_id,)))
                return TaskEntry(TaskRecord(task[0], task[1], task[2], task[3], orjson.loads(task[4]), task[5]), _run_row(run), messages)

            cached = await self._read(read)
            if cached is None:
                return None
            self._tasks.keep(cached, commits)
        if cached.run.tenant != tenant:
            return None
        return cached.record, cached.run, list(cached.history) if history else None

    async def list_task_messages(self, task_id: str) -> list[dict[str, Any]]:
        cached = self._tasks.get(task_id)
        if cached is not None:
            return list(cached.history)

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            return [orjson.loads(r[0]) for r in conn.execute(Q["list_task_messages"], (task_id,))]

        return await self._read(read)

    # push configs ------------------------------------------------------------------------

    async def put_push_config(self, row: PushConfigRow) -> None:
        params = _push_params(row)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(Q["upsert_push_config"], params)

        await self._write(write)

    async def list_push_configs(self, task_id: str) -> list[PushConfigRow]:
        return await self._read(lambda conn: [_push_row(r) for r in conn.execute(Q["list_push_configs"], (task_id,))])

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return await self._write(lambda conn: conn.execute(Q["delete_push_config"], (task_id, config_id)).rowcount > 0)

    # webhooks ------------------------------------------------------------------------------

    async def put_webhook(self, row: WebhookRow) -> None:
        params = {
            "webhook_id": row.webhook_id,
            "tenant": row.tenant,
            "url": row.url,
            "events": orjson.dumps(row.events).decode(),
            "tags": orjson.dumps(row.tags).decode(),
            "secret": row.secret,
            "secret_fingerprint": row.secret_fingerprint,
            "created_at": row.created_at,
        }

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(Q["insert_webhook"], params)
            self._webhooks.pop(row.tenant, None)

        await self._write(write)

    async def get_webhook(self, webhook_id: str) -> WebhookRow | None:
        def read(conn: sqlite3.Connection) -> WebhookRow | None:
            row = conn.execute(Q["get_webhook"], (webhook_id,)).fetchone()
            return None if row is None else _webhook_row(row)

        return await self._read(read)

    async def delete_webhook(self, tenant: str, webhook_id: str) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            deleted = conn.execute(Q["delete_webhook"], (tenant, webhook_id)).rowcount > 0
            self._webhooks.pop(tenant, None)
            return deleted

        return await self._write(write)

    # the outbox ----------------------------------------------------------------------------

    async def due_deliveries(self, now: str, limit: int, *, owner: str = "local", claim_seconds: float = 60.0) -> list[DeliveryRow]:
        return await self._read(lambda conn: [_delivery_row(r) for r in conn.execute(Q["due_deliveries"], (now, limit))])

    async def next_delivery_at(self) -> str | None:
        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(Q["next_delivery_at"]).fetchone()
            return None if row is None else row[0]

        return await self._read(read)

    async def record_attempt(
        self, delivery_id: str, *, status: str, attempts: int, next_attempt_at: str, last_error: str | None, now: str
    ) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(Q["record_attempt"], (status, attempts, next_attempt_at, last_error, now, delivery_id))
            if status in ("delivered", "dead"):
                row = conn.execute(Q["get_delivery"], (delivery_id,)).fetchone()
                if row is not None and row[2] == "a2a-push" and row[9]:
                    conn.execute(Q["discard_push_secrets"], (push_stream_task(row[4]), row[3]))

        await self._write(write)

    async def list_deliveries(self, tenant: str | None, status: str | None, limit: int = 100) -> list[DeliveryRow]:
        clauses, params = [], []
        if tenant is not None:
            clauses.append("tenant = ?")
            params.append(tenant)
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = (
            "SELECT delivery_id, tenant, kind, target_id, stream_key, run_id, sequence, url, body, final, status, attempts, "
            f"next_attempt_at, last_error, created_at, updated_at FROM outbox {where} ORDER BY delivery_id DESC LIMIT ?"
        )
        return await self._read(lambda conn: [_delivery_row(r) for r in conn.execute(sql, [*params, limit])])

    async def redeliver(self, delivery_id: str, tenant: str | None, now: str) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            row = conn.execute(Q["get_delivery"], (delivery_id,)).fetchone()
            if row is None or row[10] != "dead" or (tenant is not None and row[1] != tenant):
                return False
            conn.execute(Q["record_attempt"], ("pending", 0, now, row[13], now, delivery_id))
            return True

        return await self._write(write)

    # leases (one host: they are kept, but nobody else competes) -----------------------------

    async def claim_run(self, run_id: str, owner: str, ttl: float) -> int | None:
        params = {"run_id": run_id, "owner": owner, "expires_at": _later(ttl), "now": _now()}

        def write(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(Q["claim_run"], params).fetchone()
            return None if row is None else int(row[0])

        return await self._write(write)

    async def renew_leases(self, owner: str, ttl: float) -> list[str]:
        expires, current = _later(ttl), _now()
        return await self._write(lambda conn: [r[0] for r in conn.execute(Q["renew_leases"], (expires, owner, current)).fetchall()])

    async def release_run(self, run_id: str, owner: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(Q["release_run"], (run_id, owner))

        await self._write(write)

    async def orphaned_runs(self, now: str, limit: int) -> list[str]:
        return await self._read(lambda conn: [r[0] for r in conn.execute(Q["orphaned_runs"], (now, _now(), limit))])

    async def announce(self, run_id: str) -> None:
        """Nothing to do: one process, and its notifier is in memory."""

    def on_announce(self, callback: Callable[[str], None]) -> None:
        """Nothing ever arrives: no other host shares this file."""
