"""The one connection that writes, in a process of its own, and how the host hands it jobs.

Every write is a job: a function the writer process runs on its connection with the job's
arguments (a commit's ``CommitJob`` methods, or one of ``_writes``). A job goes down a
socket at once when the process is idle; otherwise the jobs made in one turn of the event
loop go together when the turn ends (or as soon as ``_EAGER`` of them wait), pickled as one
message. The process takes every job waiting there, writes them as one batch (``_group``:
one transaction, one fsync) and sends their outcomes back in one message, which the event
loop reads when the socket is readable. The host's side never blocks: what the socket does
not take now is sent when it is writable.

Why a process: as a thread, the writer let go of the interpreter lock around each SQLite
statement and then had to win it back from the event loop, about 14 times a batch, and
under load that wait was most of a batch's time (docs/benchmarks.md). A process has an
interpreter of its own.

It is a fresh interpreter (``main`` below, on the host's own ``sys.path``), never a fork of
the host, whose other threads may hold SQLite's or Python's locks at the moment of a fork.
It runs in a process group of its own (a terminal's Ctrl-C is the host's to handle) and
ignores SIGINT and SIGTERM (a service manager may signal every process of the service): it
ends when the host asks it to, after the jobs sent before, or when the socket closes
because the host died, after writing the jobs the host had sent (as if it had died a moment
later; nobody learns their outcome). A batch it is writing when it dies itself is committed
whole or not at all, as at any crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tether.errors import StoreUnavailable
from tether.store.sqlite import _inserts
from tether.store.sqlite._driver import connect
from tether.store.sqlite._group import Job, write_batch

log = logging.getLogger("tether.store")

T = TypeVar("T")
_MAX_BATCH = 512
#: jobs of one turn that go at once rather than when the turn ends: in a long turn (hundreds
#: of requests answered and read in one go) the process starts writing while the loop works on
_EAGER = 16
#: a message on the socket: its length (4 bytes), then its bytes
_LENGTH = 4
#: a message of jobs: how many (4 bytes), their sequence numbers (8 bytes each), then the
#: jobs pickled as one list, so that a message that cannot be read is still answered, job by job
_COUNT, _SEQ = 4, 8
#: the message that asks the writer process to finish the jobs sent before and end
_STOP = b""
#: how the writer process starts (``main``, with the socket's descriptor and the file's path)
_ENTRY = f"from {__name__} import main; main()"

#: a job as it is sent: the function, its arguments after the connection, and a commit's prepare
Wire = tuple[Callable[..., Any], tuple[Any, ...], Callable[[sqlite3.Connection], _inserts.Rows] | None]
#: an outcome as it comes back: the job's sequence number, its result, what it raised
Answer = tuple[int, Any, BaseException | None]


def _framed(message: bytes) -> bytes:
    return len(message).to_bytes(_LENGTH, "little") + message


def _settle(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Resolve futures of one event loop (called in that loop, once per batch)."""
    for future, result, error in outcomes:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


class Writer:
    """The writer process and the socket to it, served by the event loop that started it.

    ``on_batch`` is told each batch's size once written, before anyone waiting learns the outcome.
    A write may come from another event loop: its job goes through the serving loop, and
    its outcome back to its own.
    """

    def __init__(self, on_batch: Callable[[int], None] | None = None) -> None:
        self._on_batch = on_batch
        #: guards the sequence, the jobs of this turn, the jobs waiting for an outcome and ``_ended``
        self._lock = threading.Lock()
        self._sequence = 0
        self._turn: list[tuple[int, Wire]] = []
        self._waiting: dict[int, tuple[asyncio.Future[Any], asyncio.AbstractEventLoop]] = {}
        #: why writes are refused, once the process is gone or going
        self._ended: str | None = None
        # the serving loop's own (touched in that loop only)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._socket: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._unsent = bytearray()
        self._received = bytearray()
        self._sending = False
        self._gone: asyncio.Future[None] | None = None

    def start(self, path: Path) -> None:
        """Start the writer process on the file at ``path``; the running loop serves it from now on."""
        self._loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        with theirs:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _ENTRY, str(theirs.fileno()), str(path)],
                pass_fds=(theirs.fileno(),),
                process_group=0,  # a terminal's Ctrl-C is the host's to handle; the host ends this process
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},  # this very Tether
            )
        ours.setblocking(False)
        self._socket = ours
        self._gone = self._loop.create_future()
        self._loop.add_reader(ours.fileno(), self._readable)

    async def stop(self) -> None:
        """Let the process finish the jobs sent so far, then wait for it to end (in the serving loop)."""
        if self._socket is None or self._process is None or self._gone is None:
            return
        with self._lock:
            self._ended = self._ended or "the store is closed"
        self._flush()  # the jobs of this turn are written first
        self._queue(_STOP)
        await self._gone  # the process closed its end: every outcome it sent has been read
        await asyncio.to_thread(self._process.wait)
        self._socket.close()

    async def write(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...] = (),
        prepare: Callable[[sqlite3.Connection], _inserts.Rows] | None = None,
    ) -> T:
        """Send a job and wait for its outcome: what ``fn(conn, *args)`` returned, or what it raised."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._ended is not None:
                raise StoreUnavailable(self._ended)
            self._sequence += 1
            self._waiting[self._sequence] = (future, loop)
            self._turn.append((self._sequence, (fn, args, prepare)))
            waiting, first = len(self._turn), len(self._turn) == 1
            idle = len(self._waiting) == waiting  # the process has nothing to write: it waits for this
        assert self._loop is not None
        if loop is self._loop and (idle or waiting >= _EAGER):
            self._flush()  # now: the process is idle, or enough jobs wait to start a batch
        elif first:  # else the turn's jobs go together when it ends
            if loop is self._loop:
                loop.call_soon(self._flush)
            else:
                self._loop.call_soon_threadsafe(self._flush)
        return await future

    # sending (in the serving loop) -------------------------------------------------------------

    def _flush(self) -> None:
        """Send this turn's jobs as one message."""
        with self._lock:
            jobs, self._turn = self._turn, []
        if not jobs:
            return
        try:
            message = _jobs_message(jobs)
        except Exception:  # noqa: BLE001 - a job that does not pickle: refuse it alone, send the others
            jobs = [job for job in jobs if self._picklable(job)]
            if not jobs:
                return
            message = _jobs_message(jobs)
        self._queue(message)

    def _picklable(self, job: tuple[int, Wire]) -> bool:
        """Whether ``job`` pickles; if not, its caller learns why (a bug: a write must be plain data)."""
        sequence, wire = job
        try:
            pickle.dumps(wire, protocol=pickle.HIGHEST_PROTOCOL)
            return True
        except Exception as exc:  # noqa: BLE001
            failure = StoreUnavailable(f"a write could not be sent to the writer process: {exc}")
            self._hand_over([(sequence, None, failure)])
            return False

    def _queue(self, message: bytes) -> None:
        self._unsent += _framed(message)
        self._send()

    def _send(self) -> None:
        """Send what the socket takes now; the rest when it is writable."""
        assert self._socket is not None and self._loop is not None
        try:
            while self._unsent:
                sent = self._socket.send(self._unsent)
                del self._unsent[:sent]
        except BlockingIOError:
            pass
        except OSError:
            self._unsent.clear()  # the process is gone: reading the socket's end fails every waiting job
        if self._unsent and not self._sending:
            self._loop.add_writer(self._socket.fileno(), self._send)
            self._sending = True
        elif not self._unsent and self._sending:
            self._loop.remove_writer(self._socket.fileno())
            self._sending = False

    # receiving (in the serving loop) -----------------------------------------------------------

    def _readable(self) -> None:
        """Read what the process sent; hand over each whole message's outcomes."""
        assert self._socket is not None
        try:
            while True:
                data = self._socket.recv(1 << 20)
                if not data:
                    self._closed()
                    return
                self._received += data
        except BlockingIOError:
            pass
        except OSError:
            self._closed()
            return
        while len(self._received) >= _LENGTH:
            length = int.from_bytes(self._received[:_LENGTH], "little")
            if len(self._received) < _LENGTH + length:
                break
            message = bytes(self._received[_LENGTH : _LENGTH + length])
            del self._received[: _LENGTH + length]
            try:
                size, answers = pickle.loads(message)
            except Exception:  # a bug: the waiting jobs can no longer be told apart; fail them all
                log.exception("the SQLite writer process's outcomes could not be read")
                self._closed()
                return
            if self._on_batch is not None and size:
                self._on_batch(size)
            self._hand_over(answers)

    def _hand_over(self, answers: list[Answer]) -> None:
        """Give each outcome to the loop that waits for it: at once in this loop, one call to each other."""
        settled: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        with self._lock:
            for sequence, result, error in answers:
                future, loop = self._waiting.pop(sequence)
                settled.setdefault(loop, []).append((future, result, error))
        for loop, results in settled.items():
            if loop is self._loop:
                _settle(results)
                continue
            try:
                loop.call_soon_threadsafe(_settle, results)
            except RuntimeError:
                pass  # that loop is closed: nobody waits any more

    def _closed(self) -> None:
        """The process closed its end: refuse writes from now on, and fail the jobs still waiting."""
        assert self._socket is not None and self._loop is not None and self._gone is not None
        self._loop.remove_reader(self._socket.fileno())
        if self._sending:
            self._loop.remove_writer(self._socket.fileno())
            self._sending = False
        with self._lock:
            if self._ended is None:
                self._ended = "the SQLite writer process ended unexpectedly; restart the host"
                log.error("the SQLite writer process ended unexpectedly; every write fails until the host restarts")
            failure = self._ended
            waiting = list(self._waiting)
        self._hand_over([(sequence, None, StoreUnavailable(failure)) for sequence in waiting])
        if not self._gone.done():
            self._gone.set_result(None)


def _jobs_message(jobs: list[tuple[int, Wire]]) -> bytes:
    """Jobs as one message: their count, their sequence numbers, then the jobs pickled as one list."""
    head = len(jobs).to_bytes(_COUNT, "little") + b"".join(sequence.to_bytes(_SEQ, "little") for sequence, _ in jobs)
    return head + pickle.dumps([wire for _, wire in jobs], protocol=pickle.HIGHEST_PROTOCOL)


# the writer process ---------------------------------------------------------------------------


def main() -> None:
    """The writer process's entry: ``python -c <_ENTRY> FD PATH``, as ``Writer.start`` runs it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(socket.socket(fileno=int(sys.argv[1])), Path(sys.argv[2]))


def serve(sock: socket.socket, path: Path) -> None:
    """Batches of jobs from ``sock``, written on one connection to ``path``, their outcomes sent back.

    Once the host is gone, the jobs it sent before are still written, unanswered, as if it had
    died a moment later: among them the outbox's receipts, whose deliveries would otherwise be
    sent again after the restart.
    """
    conn = connect(path)
    try:
        answering = True  # until the host is gone
        stop = ended = False
        while not (stop or ended):
            jobs: list[tuple[int, Job]] = []
            refused: list[Answer] = []
            message = _receive(sock)
            while True:
                if message is None:
                    ended = True  # the host is gone and has nothing more to send
                    break
                if message == _STOP:
                    stop = True
                    break
                _read(message, jobs, refused)
                if len(jobs) >= _MAX_BATCH or not select.select([sock], [], [], 0)[0]:
                    break
                message = _receive(sock)
            if refused and answering:  # jobs that could not be read: answered at once, as a batch of none
                answering = _answer(sock, 0, refused)
            for start in range(0, len(jobs), _MAX_BATCH):
                part = jobs[start : start + _MAX_BATCH]
                outcomes = write_batch(conn, [job for _, job in part])
                if answering:
                    answers = [(sequence, result, error) for (sequence, _), (result, error) in zip(part, outcomes)]
                    answering = _answer(sock, len(part), answers)
    finally:
        conn.close()


def _answer(sock: socket.socket, size: int, answers: list[Answer]) -> bool:
    """Send a batch's outcomes to the host; False when it is gone."""
    try:
        sock.sendall(_framed(_answers_message(size, answers)))
    except OSError:
        return False
    return True


def _receive(sock: socket.socket) -> bytes | None:
    """The next whole message, or None once the host has closed its end."""
    head = _exactly(sock, _LENGTH)
    if head is None:
        return None
    return _exactly(sock, int.from_bytes(head, "little"))


def _exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read(message: bytes, jobs: list[tuple[int, Job]], refused: list[Answer]) -> None:
    """Add a message's jobs to ``jobs``, or, if it cannot be read, each of them to ``refused``."""
    count = int.from_bytes(message[:_COUNT], "little")
    end = _COUNT + count * _SEQ
    sequences = [int.from_bytes(message[at : at + _SEQ], "little") for at in range(_COUNT, end, _SEQ)]
    try:
        wires: list[Wire] = pickle.loads(message[end:])
    except Exception as exc:  # noqa: BLE001 - jobs that cannot be read are refused, each to its caller
        failure = StoreUnavailable(f"the writer process could not read a job: {exc}")
        refused.extend((sequence, None, failure) for sequence in sequences)
        return
    jobs.extend((sequence, Job(*wire)) for sequence, wire in zip(sequences, wires))


def _answers_message(size: int, answers: list[Answer]) -> bytes:
    """A batch's size and outcomes, pickled. A refusal that would not come back whole on the
    host's side (an exception that does not pickle) comes back as StoreUnavailable naming it;
    so does a result that does not pickle, alone (its write is done; only the caller is told
    otherwise), where it would otherwise have ended this process and every write after it."""
    checked = []
    for sequence, result, error in answers:
        if error is not None:
            try:
                pickle.loads(pickle.dumps(error))
            except Exception:  # noqa: BLE001 - any reason: say what it was instead
                error = StoreUnavailable(f"the write failed: {type(error).__name__}: {error}")
        checked.append((sequence, result, error))
    try:
        return pickle.dumps((size, checked), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a result that does not pickle (a bug): refuse it alone
        return pickle.dumps((size, [_sendable(answer) for answer in checked]), protocol=pickle.HIGHEST_PROTOCOL)


def _sendable(answer: Answer) -> Answer:
    """``answer``, or StoreUnavailable in its place when its result does not pickle."""
    sequence, result, _ = answer
    try:
        pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - any reason: say what it was instead
        return sequence, None, StoreUnavailable(f"the write's result could not be sent back: {exc}")
    return answer
