"""The SQLite store's writer process: what crosses to it, and how it ends.

Writes run in a process of their own (``tether.store.sqlite._writer``). A fan-out's body is
a callable until rendered, and a job must cross to that process as plain data, so the
store renders the fan-outs a subscriber may match and leaves out the others: the
subscribers it knows of are read when it opens and kept as each is registered. The
process must not outlive its host, nor stop on a terminal's Ctrl-C, and when it is gone
every write must fail plainly rather than hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import HostProcess, wait_until
from store_records import TENANT, advance, create_run, push_config, webhook

from tether.errors import StoreUnavailable
from tether.store.base import Fanout
from tether.store.sqlite import SqliteStore, _writer, _writes
from tether.store.sqlite._driver import connect
from tether.store.sqlite._migrate import apply_migrations


def _writer_pid(store: SqliteStore) -> int:
    process = store._writer._process  # the one private reach of these tests: which process to signal
    assert process is not None
    return process.pid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


class Rendering:
    """A fan-out body that counts how often it is rendered."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.calls = 0

    def __call__(self) -> bytes:
        self.calls += 1
        return self.body


async def test_subscribers_registered_before_the_store_opened_still_get_their_fan_outs(tmp_path: Path) -> None:
    path = tmp_path / "tether.db"
    async with SqliteStore(path) as store:
        run = await create_run(store)
        await store.put_webhook(webhook("wh_done", events=["run.completed"]))
        await store.put_push_config(push_config(run.run_id, "p1"))
    pushed, hooked = Rendering(b'{"push":1}'), Rendering(b'{"webhook":1}')
    async with SqliteStore(path) as reopened:
        _, enqueued = await advance(
            reopened,
            run,
            extras=[
                Fanout("a2a-push", TENANT, run.run_id, 1, pushed, task_id=run.run_id),
                Fanout("webhook", TENANT, run.run_id, 1, hooked, event_type="run.completed"),
            ],
        )
        deliveries = await reopened.list_deliveries(TENANT, None)
    assert enqueued == 2 and pushed.calls == hooked.calls == 1
    assert sorted((d.target_id, d.body) for d in deliveries) == [("p1", b'{"push":1}'), ("wh_done", b'{"webhook":1}')]


async def test_a_fan_out_no_subscriber_can_match_is_never_rendered(sqlite_store: SqliteStore) -> None:
    run = await create_run(sqlite_store)
    body = Rendering(b"{}")

    def completed(sequence: int) -> list[Fanout]:
        return [
            Fanout("webhook", TENANT, run.run_id, sequence, body, event_type="run.completed"),
            Fanout("a2a-push", TENANT, run.run_id, sequence, body, task_id=run.run_id),
        ]

    run, enqueued = await advance(sqlite_store, run, extras=completed(1))
    assert (enqueued, body.calls) == (0, 0)
    await sqlite_store.put_webhook(webhook("wh_other_tenant", events=["run.completed"], tenant="globex"))
    await sqlite_store.put_push_config(push_config("another_task", "p1"))
    run, enqueued = await advance(sqlite_store, run, extras=completed(2))
    assert (enqueued, body.calls) == (0, 0)
    await sqlite_store.put_webhook(webhook("wh_done", events=["run.completed"]))
    run, enqueued = await advance(sqlite_store, run, extras=completed(3))
    assert (enqueued, body.calls) == (1, 1)  # the tenant has a webhook now; the task still has no push config


async def test_the_writer_process_ignores_ctrl_c_and_its_death_fails_every_write_plainly(
    sqlite_store: SqliteStore,
) -> None:
    pid = _writer_pid(sqlite_store)
    assert os.getpgid(pid) == pid  # a group of its own: a terminal's Ctrl-C does not reach it
    await create_run(sqlite_store)  # it serves (its signal dispositions are set before it reads a job)
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGTERM)  # what a service manager may send every process of the service
    await create_run(sqlite_store)
    assert _alive(pid)

    os.kill(pid, signal.SIGKILL)
    with pytest.raises(StoreUnavailable, match="writer process ended unexpectedly"):
        await asyncio.wait_for(create_run(sqlite_store), 10)
    with pytest.raises(StoreUnavailable, match="writer process ended unexpectedly"):
        await sqlite_store.claim_setting("host_key_fingerprint", "x")  # what /readyz asks
    assert await sqlite_store.get_run("no-such-run") is None  # reads still answer
    await asyncio.wait_for(sqlite_store.close(), 10)


@pytest.mark.process
def test_a_host_killed_alone_takes_its_writer_process_with_it(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "data").start()
    try:
        tasks = Path(f"/proc/{host.pid}/task").iterdir()
        children = [pid for task in tasks for pid in (task / "children").read_text().split()]
        writers = [int(pid) for pid in children if b"sqlite._writer" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(writers) == 1, children
        os.kill(host.pid, signal.SIGKILL)  # the host only, not its process group
        wait_until(lambda: not _alive(writers[0]), timeout=10, what="the writer process to end")
    finally:
        host.kill()


@contextlib.contextmanager
def _writer_loop(path: Path) -> Iterator[socket.socket]:
    """The writer process's loop on a migrated database at ``path``, served on a thread; yields the host's end.

    The block ends the loop with STOP and checks that it ended.
    """
    with contextlib.closing(connect(path)) as conn:
        apply_migrations(conn)
    host, process = socket.socketpair()
    serving = threading.Thread(target=_writer.serve, args=(process, path))
    serving.start()
    try:
        host.settimeout(30)
        yield host
        host.sendall(_writer._framed(_writer._STOP))
        serving.join(timeout=30)
        assert not serving.is_alive(), "the writer loop did not end on STOP"
    finally:
        host.close()
        serving.join(timeout=30)
        process.close()


def test_a_job_the_writer_process_cannot_read_is_refused_alone(tmp_path: Path) -> None:
    """The writer process's loop, driven over a socket pair: an unreadable message's job is
    answered with StoreUnavailable, and the next job is written as if nothing had happened."""
    path = tmp_path / "tether.db"
    with _writer_loop(path) as host:
        unreadable = (1).to_bytes(4, "little") + (7).to_bytes(8, "little") + b"not a pickle"
        host.sendall(_writer._framed(unreadable))
        size, answers = pickle.loads(_answer(host))
        assert size == 0 and [(s, r) for s, r, _ in answers] == [(7, None)]
        assert isinstance(answers[0][2], StoreUnavailable) and "could not read a job" in str(answers[0][2])

        host.sendall(_writer._framed(_writer._jobs_message([(8, (_writes.claim_setting, ("k", "v"), None))])))
        assert pickle.loads(_answer(host)) == (1, [(8, "v", None)])
    with contextlib.closing(connect(path)) as conn:
        assert conn.execute("SELECT value FROM host_settings WHERE name = 'k'").fetchone() == ("v",)


def _unsendable(conn: sqlite3.Connection, name: str) -> threading.Lock:
    """A write done whose result cannot cross back to the host (a bug in a write)."""
    _writes.claim_setting(conn, name, "written")
    return threading.Lock()


def test_a_write_whose_result_does_not_pickle_is_refused_alone(tmp_path: Path) -> None:
    """A result that cannot be sent back comes back as StoreUnavailable naming why, for its job
    alone; the batch's other jobs are answered, and the writer goes on."""
    path = tmp_path / "tether.db"
    with _writer_loop(path) as host:
        jobs = [(1, (_unsendable, ("a",), None)), (2, (_writes.claim_setting, ("b", "v"), None))]
        host.sendall(_writer._framed(_writer._jobs_message(jobs)))
        size, answers = pickle.loads(_answer(host))
        assert size == 2 and [(s, r) for s, r, _ in answers] == [(1, None), (2, "v")] and answers[1][2] is None
        assert isinstance(answers[0][2], StoreUnavailable) and "could not be sent back" in str(answers[0][2])
        host.sendall(_writer._framed(_writer._jobs_message([(3, (_writes.claim_setting, ("c", "w"), None))])))
        assert pickle.loads(_answer(host)) == (1, [(3, "w", None)]), "the writer goes on"
    with contextlib.closing(connect(path)) as conn:
        written = conn.execute("SELECT name, value FROM host_settings ORDER BY name").fetchall()
    assert [row for row in written if row[0] in ("a", "b", "c")] == [("a", "written"), ("b", "v"), ("c", "w")]


def _answer(sock: socket.socket) -> bytes:
    message = _writer._receive(sock)
    assert message is not None, "the writer loop closed the socket instead of answering"
    return message


def test_the_jobs_a_dead_host_sent_are_written(tmp_path: Path) -> None:
    """A host that dies with jobs on their way (the outbox's receipts among them) leaves them
    written, as if it had died a moment later: else a delivery the receiver answered and the
    host handed over would be sent again after the restart. Its outcomes go to nobody."""
    path = tmp_path / "tether.db"
    with contextlib.closing(connect(path)) as conn:
        apply_migrations(conn)
    host, process = socket.socketpair()
    jobs = [(i, (_writes.claim_setting, (f"receipt-{i}", "delivered"), None)) for i in range(1, 4)]
    # three messages, then the host's end closes: the writer reads a message, finds more waiting,
    # and reaches the end before it has written any of them
    host.sendall(b"".join(_writer._framed(_writer._jobs_message([job])) for job in jobs))
    host.close()
    serving = threading.Thread(target=_writer.serve, args=(process, path))
    serving.start()
    serving.join(timeout=30)
    process.close()
    assert not serving.is_alive(), "the writer loop did not end when the host's end closed"
    with contextlib.closing(connect(path)) as conn:
        written = conn.execute("SELECT name FROM host_settings WHERE name LIKE 'receipt-%' ORDER BY name").fetchall()
    assert written == [("receipt-1",), ("receipt-2",), ("receipt-3",)]


#: the writer is inside ``_held_write``; ``_held_write`` may go on
_ENTERED, _RELEASE = threading.Event(), threading.Event()


def _held_write(conn: sqlite3.Connection, name: str) -> str:
    """A write that waits, inside the writer's batch, until the test lets it go."""
    _ENTERED.set()
    assert _RELEASE.wait(30)
    return _writes.claim_setting(conn, name, "delivered")


def test_a_host_that_dies_while_a_batch_is_written_still_gets_its_later_jobs_written(tmp_path: Path) -> None:
    """The host dies while a batch is being written: the answer finds it gone, and the jobs it
    had sent meanwhile are read and written all the same."""
    path = tmp_path / "tether.db"
    with contextlib.closing(connect(path)) as conn:
        apply_migrations(conn)
    _ENTERED.clear()
    _RELEASE.clear()
    host, process = socket.socketpair()
    serving = threading.Thread(target=_writer.serve, args=(process, path))
    serving.start()
    try:
        host.sendall(_writer._framed(_writer._jobs_message([(1, (_held_write, ("receipt-1",), None))])))
        assert _ENTERED.wait(30), "the writer never started the first batch"
        later = [(i, (_writes.claim_setting, (f"receipt-{i}", "delivered"), None)) for i in (2, 3)]
        host.sendall(b"".join(_writer._framed(_writer._jobs_message([job])) for job in later))
    finally:
        host.close()  # dies before the first batch is answered
        _RELEASE.set()
    serving.join(timeout=30)
    process.close()
    assert not serving.is_alive(), "the writer loop did not end when the host's end closed"
    with contextlib.closing(connect(path)) as conn:
        written = conn.execute("SELECT name FROM host_settings WHERE name LIKE 'receipt-%' ORDER BY name").fetchall()
    assert written == [("receipt-1",), ("receipt-2",), ("receipt-3",)]
