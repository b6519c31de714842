"""Run hints between hosts over LISTEN/NOTIFY: a wake-up, never the payload.

A hint says only "run X changed" (``"<origin>:<run id>"`` on one channel). It is sent
after the commit, from one dedicated connection per store, never inside a write
transaction (a NOTIFY in a transaction takes a global lock at commit). It is received on
another dedicated autocommit connection that checks itself every 30 s and reconnects
with backoff when it drops. Hints sent while it is away are lost, which is why every
waiter also polls: a lost hint costs latency, never a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from tether.store.postgres._driver import CONNECTION_ERRORS, Q, asyncpg, connect

log = logging.getLogger(__name__)

CHANNEL = "tether_runs"
KEEPALIVE_SECONDS = 30.0
RECONNECT_FIRST_DELAY = 0.1
RECONNECT_MAX_DELAY = 5.0

_LISTEN_ERRORS = (*CONNECTION_ERRORS, asyncpg.PostgresError)


def encode_hint(origin: str, run_id: str) -> str:
    return f"{origin}:{run_id}"


def decode_hint(payload: str) -> tuple[str, str]:
    """(origin, run id) of a hint; the origin never holds a colon, a run id may."""
    origin, _, run_id = payload.partition(":")
    return origin, run_id


class Notifier:
    """Sends hints from one connection of its own, opened on the first hint.

    Hints that arrive while one is being sent wait for it and then go out together, in one
    statement (one round trip and one commit of the notifying transaction for all of them):
    under load a host commits far faster than one connection can send a hint per commit,
    and hints sent one by one queued up behind each other.
    """

    def __init__(self, dsn: str, origin: str) -> None:
        self._dsn = dsn
        self._origin = origin
        self._conn: asyncpg.Connection | None = None
        #: the hints waiting for the next statement, by run id, and what they will be told
        self._pending: dict[str, asyncio.Future[bool]] = {}
        self._sending: asyncio.Task[None] | None = None

    async def send(self, run_id: str) -> bool:
        """Send one hint; returns False when it could not be sent (logged, not raised).

        A batch that fails is retried once on a fresh connection; past that it is dropped,
        because the commits it announces are already durable and the other hosts poll.
        """
        sent = self._pending.get(run_id)
        if sent is None:
            sent = self._pending[run_id] = asyncio.get_running_loop().create_future()
        if self._sending is None:
            self._sending = asyncio.create_task(self._send_pending(), name="tether-pg-notifier")
        return await asyncio.shield(sent)

    async def _send_pending(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, {}
                ok = await self._send_batch([encode_hint(self._origin, run_id) for run_id in batch])
                for future in batch.values():
                    if not future.done():
                        future.set_result(ok)
        finally:
            self._sending = None
            for future in self._pending.values():  # cancelled while sending: nobody waits in vain
                if not future.done():
                    future.set_result(False)
            self._pending = {}

    async def _send_batch(self, payloads: list[str]) -> bool:
        for attempt in (1, 2):
            try:
                if self._conn is None or self._conn.is_closed():
                    self._conn = await connect(self._dsn, "tether-notifier")
                await self._conn.execute(Q["notify_runs"], CHANNEL, payloads)
                return True
            except _LISTEN_ERRORS as exc:
                self._drop()
                if attempt == 2:
                    log.warning("could not announce %d run(s) to the other hosts: %s", len(payloads), exc)
        return False

    def _drop(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            self._conn.terminate()
        self._conn = None

    async def close(self) -> None:
        sending, self._sending = self._sending, None
        if sending is not None:
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
        if self._conn is not None:
            try:
                await asyncio.wait_for(self._conn.close(), 5.0)
            except (*_LISTEN_ERRORS, TimeoutError):
                self._conn.terminate()
            self._conn = None


class Listener:
    """Receives the hints of other stores and hands each run id to the callbacks."""

    def __init__(self, dsn: str, origin: str, *, keepalive: float = KEEPALIVE_SECONDS) -> None:
        self._dsn = dsn
        self._origin = origin
        self._keepalive = keepalive
        self._callbacks: list[Callable[[str], None]] = []
        self._listening_callbacks: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        #: set while the connection is listening (tests and health checks wait on it)
        self.listening = asyncio.Event()

    def add(self, callback: Callable[[str], None]) -> None:
        self._callbacks.append(callback)

    def on_listening(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` each time listening (re)starts: hints sent before then were missed."""
        self._listening_callbacks.append(callback)

    @property
    def wanted(self) -> bool:
        """Someone asked for hints: listen once the store is open."""
        return bool(self._callbacks)

    def start(self) -> None:
        """Start listening in the background (needs a running event loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="tether-pg-listener")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.listening.clear()

    async def _run(self) -> None:
        delay = RECONNECT_FIRST_DELAY
        while True:
            try:
                conn = await connect(self._dsn, "tether-listener")
            except _LISTEN_ERRORS as exc:
                log.warning("hint listener cannot connect (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
                continue
            try:
                await self._listen(conn)
            except _LISTEN_ERRORS as exc:
                log.warning("hint listener lost its connection (%s); reconnecting", exc)
            finally:
                if self.listening.is_set():  # it worked for a while: start the backoff over
                    delay = RECONNECT_FIRST_DELAY
                self.listening.clear()
                if not conn.is_closed():
                    conn.terminate()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)

    async def _listen(self, conn: asyncpg.Connection) -> None:
        """Listen until the connection drops or a keepalive fails (then raise or return)."""
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        await conn.add_listener(CHANNEL, self._on_notification)
        for callback in list(self._listening_callbacks):
            callback()
        self.listening.set()
        while not lost.is_set():
            try:
                await asyncio.wait_for(lost.wait(), self._keepalive)
            except TimeoutError:
                await asyncio.wait_for(conn.execute(Q["keepalive"]), self._keepalive)
        log.warning("hint listener connection closed; reconnecting")

    def _on_notification(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        origin, run_id = decode_hint(payload)
        if origin == self._origin or not run_id:
            return
        for callback in list(self._callbacks):
            try:
                callback(run_id)
            except Exception:  # one bad callback must not silence the others
                log.exception("announce callback %r failed for run %s", callback, run_id)
