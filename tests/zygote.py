"""``python -m tether`` processes forked from a zygote that imported Tether once, instead of started afresh.

A ``tether serve`` started afresh spends ~0.8 of its ~1.05 CPU-seconds importing; the suite
starts a few hundred, and many ``tether`` commands. Forked, a host's start and stop costs
~0.22 CPU-s instead of ~0.92, a ``tether keys create`` ~0.15 instead of ~0.30, after the
zygote's one import (~0.8 CPU-s per worker). ``popen`` and ``run`` take the
arguments of ``subprocess.Popen`` and ``subprocess.run`` that the harness uses and, for a
``[sys.executable, "-m", "tether", ...]`` command, ask this worker's zygote
(``zygote_server``, started on first use) to fork the process instead: same arguments,
environment, working directory, descriptors 0-2 and session as Popen would have given it,
running ``tether`` exactly as ``python -m tether`` does. They return a ``ZygoteProcess``,
which answers like a ``Popen`` (``pid``, ``poll``, ``wait``, ``send_signal``, ``returncode``
with ``-N`` for signal N, ``stdout``); its pid stays valid until its exit has been observed.

Anything else, a request the zygote refuses (an environment it cannot honour, see
``zygote_server``) and every start once the zygote is unavailable get a plain
``subprocess.Popen``: the zygote never fails a test, it only makes it cheaper.
``TETHER_TEST_ZYGOTE=0`` turns it off. The zygote ends with its worker (``shutdown``, at exit).

What still tells a forked child from a fresh one, none of which a test looks at: ``ps`` and
``/proc/PID/cmdline`` show the zygote's command line (``python -c ... zygote_server.py``),
``/proc/PID/environ`` the zygote's first environment (``os.environ`` is the requested one),
its parent is the zygote, all children of one zygote share its hash seed (set and dict
orders of strings agree between them), and what the zygote imported is frozen out of the
child's garbage collections (``gc.freeze``).
"""

from __future__ import annotations

import atexit
import io
import json
import locale
import logging
import os
import select
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

SWITCH = "TETHER_TEST_ZYGOTE"
_SERVER = str(Path(__file__).with_name("zygote_server.py"))
_HEADER = struct.Struct("!I")
#: the first request waits for the zygote's imports
_ANSWER_DEADLINE = 60.0
#: a child that ended has its status on the way: how long to wait for it
_STATUS_DEADLINE = 30.0
#: the worker's environment before any test changed it: the zygote imports under it
_BASE_ENV = dict(os.environ)
_BOOT = """\
import importlib.util, sys
spec = importlib.util.spec_from_file_location("zygote_server", sys.argv[1])
server = importlib.util.module_from_spec(spec)
spec.loader.exec_module(server)
request = server.serve(int(sys.argv[2]), int(sys.argv[3]))
del importlib, spec, server
if request is not None:
    del request
    import runpy
    runpy._run_module_as_main("tether")
"""
_log = logging.getLogger(__name__)


class Unavailable(Exception):
    """The zygote cannot start this process (the sentence says why); Popen does."""


class ZygoteProcess:
    """A process the zygote forked, answering as ``subprocess.Popen`` does for what the harness uses."""

    def __init__(self, args: list[str], pid: int, conn: socket.socket, stdout: IO[Any] | None) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: IO[Any] | None = None
        self.stdout = stdout
        self.stderr: IO[Any] | None = None
        self._conn: socket.socket | None = conn
        self._pidfd = os.pidfd_open(pid)
        self._received = b""

    def poll(self) -> int | None:
        if self.returncode is None:
            self._receive(0)
            if self.returncode is None and _readable(self._pidfd, 0):  # ended: its status is on the way
                self._receive(_STATUS_DEADLINE)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._receive(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        self.poll()
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)

    def _receive(self, timeout: float | None) -> None:
        """Read the zygote's ``exit N`` for up to ``timeout`` seconds (None: for as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if self._conn is None:
                self._lost(deadline)
                return
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not _readable(self._conn.fileno(), left):
                return
            chunk = self._conn.recv(4096)
            if not chunk:
                self._conn.close()
                self._conn = None
                continue
            self._received += chunk
            if self._received.endswith(b"\n"):
                word, _, value = self._received.decode().strip().partition(" ")
                assert word == "exit", self._received
                self._ended(int(value))

    def _ended(self, returncode: int) -> None:
        self.returncode = returncode
        if self._conn is not None:
            self._conn.close()  # the zygote reaps it now
            self._conn = None
        os.close(self._pidfd)

    def _lost(self, deadline: float | None) -> None:
        """The zygote ended while this process ran: its exit status can only be read while it is a zombie."""
        ZYGOTE.fail(f"it ended while pid {self.pid} ran")
        if not _readable(self._pidfd, None if deadline is None else max(0.0, deadline - time.monotonic())):
            return
        try:  # the 52nd field: the exit status, while no one reaped it
            status = int(Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()[49])
        except (OSError, IndexError, ValueError):
            raise RuntimeError(f"pid {self.pid} ended after its zygote: its exit status is lost") from None
        self._ended(status >> 8 if status & 0x7F == 0 else -(status & 0x7F))

    def __del__(self) -> None:
        if getattr(self, "_conn", None) is not None:
            self._conn.close()  # type: ignore[union-attr]
        if getattr(self, "_pidfd", None) is not None and self.returncode is None:
            os.close(self._pidfd)


def _readable(fd: int, timeout: float | None) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


class Zygote:
    """This worker's zygote: started on first use, given up on (once, said in the log) when it fails."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._log: IO[bytes] | None = None
        self._address = ""
        self.unavailable: str | None = None if os.environ.get(SWITCH, "1") != "0" else f"{SWITCH}=0"
        self._said: set[str] = set()

    def spawn(
        self, args: list[str], env: dict[str, str], cwd: str, fds: list[int], new_session: bool
    ) -> tuple[int, socket.socket]:
        """Fork ``python -m tether *args``: its pid, and the connection its exit status comes on."""
        with self._lock:
            if self.unavailable is None and self._proc is None:
                self._start()
            if self.unavailable is not None:
                raise Unavailable(self.unavailable)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self._address)
            body = json.dumps({"args": args, "env": env, "cwd": cwd, "new_session": new_session}).encode()
            socket.send_fds(conn, [_HEADER.pack(len(body))], fds)
            conn.sendall(body)
            answer = _read_line(conn, _ANSWER_DEADLINE)
        except OSError as exc:
            conn.close()
            self.fail(f"a request failed: {exc}")
            raise Unavailable(str(exc)) from None
        word, _, value = answer.partition(" ")
        if word == "pid":
            return int(value), conn
        conn.close()
        if word == "refuse":
            self._say(f"zygote: Popen for this start, the zygote cannot honour its environment ({value})")
            raise Unavailable(value)
        self.fail(f"it answered {answer!r}")
        raise Unavailable(answer)

    def _start(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._address = f"\0tether-zygote-{os.getpid()}-{os.urandom(4).hex()}"
        listener.bind(self._address)
        listener.listen(64)
        ours, theirs = socket.socketpair()
        self._log = tempfile.TemporaryFile(prefix="tether-zygote-")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, _SERVER, str(listener.fileno()), str(theirs.fileno())],
                pass_fds=(listener.fileno(), theirs.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                start_new_session=True,  # a terminal's Ctrl-C is for pytest; the zygote ends with its worker
                env=_BASE_ENV,
            )
        except OSError as exc:
            ours.close()
            self.unavailable = f"it could not start: {exc}"
            self._say(f"zygote unavailable ({self.unavailable}); starting tether processes with subprocess.Popen")
            return
        finally:
            listener.close()  # the zygote holds it: a connection waits in its backlog until it has imported
            theirs.close()
        self._control = ours
        atexit.register(self.shutdown)

    def fail(self, why: str) -> None:
        """Give up on the zygote (once): every later start is a plain Popen."""
        with self._lock:
            if self.unavailable is not None:
                return
            self.unavailable = why
            said = ""
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            if self._log is not None:
                self._log.seek(0)
                said = self._log.read().decode(errors="replace").strip()
        self._say(
            f"zygote unavailable ({why}); starting tether processes with subprocess.Popen"
            + (f":\n{said}" if said else "")
        )

    def shutdown(self) -> None:
        """Let the zygote go and wait for it (its children that still run, run on)."""
        with self._lock:
            if self._control is not None:
                self._control.close()
                self._control = None
            if self._proc is not None:
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc = None
            if self._log is not None:
                self._log.close()
                self._log = None
            self.unavailable = self.unavailable or "it was shut down"

    def _say(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            _log.warning("%s", message)
            print(message, file=sys.__stderr__, flush=True)


def _read_line(conn: socket.socket, timeout: float) -> str:
    received = b""
    deadline = time.monotonic() + timeout
    while not received.endswith(b"\n"):
        if not _readable(conn.fileno(), max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"no answer in {timeout:.0f} s")
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionResetError("the zygote hung up")
        received += chunk
    return received.decode().strip()


ZYGOTE = Zygote()
_TETHER = [sys.executable, "-m", "tether"]


def popen(
    cmd: list[str],
    *,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    text: bool = False,
    bufsize: int = -1,
    env: dict[str, str] | None = None,
    start_new_session: bool = False,
) -> subprocess.Popen[Any] | ZygoteProcess:
    """``subprocess.Popen(cmd, ...)``, forked from the zygote when ``cmd`` runs ``python -m tether``."""
    if cmd[:3] == _TETHER and ZYGOTE.unavailable is None:
        try:
            return _fork(cmd, stdout, stderr, text, bufsize, env, start_new_session)
        except Unavailable:
            pass
    return subprocess.Popen(
        cmd, stdout=stdout, stderr=stderr, text=text, bufsize=bufsize, env=env, start_new_session=start_new_session
    )


def run(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)``, forked as ``popen`` forks."""
    proc = popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if isinstance(proc, subprocess.Popen):
        with proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
        return subprocess.CompletedProcess(cmd, proc.wait(), _text(out), _text(err))
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    try:
        out, err = _read_both(proc.stdout, proc.stderr, deadline)
        returncode = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise subprocess.TimeoutExpired(cmd, timeout) from None
    finally:
        proc.stdout.close()
        proc.stderr.close()
    return subprocess.CompletedProcess(cmd, returncode, _text(out), _text(err))


def _fork(
    cmd: list[str],
    stdout: int | IO[Any] | None,
    stderr: int | IO[Any] | None,
    text: bool,
    bufsize: int,
    env: dict[str, str] | None,
    start_new_session: bool,
) -> ZygoteProcess:
    """The zygote's child for ``popen``'s arguments (Unavailable when it cannot be one)."""
    ours: dict[int, int] = {}  # pipe ends: the child's descriptor -> the end we read
    theirs: list[int] = []  # what the child gets as 0, 1 and 2
    try:
        for target, given in ((0, None), (1, stdout), (2, stderr)):
            if given == subprocess.PIPE:
                read, write = os.pipe()
                ours[target] = read
                theirs.append(write)
            elif given is None:
                theirs.append(target)  # inherited, as Popen leaves it
            elif isinstance(given, int) and given >= 0:
                theirs.append(given)
            elif hasattr(given, "fileno"):
                theirs.append(given.fileno())
            else:
                raise Unavailable(f"unsupported {given!r}")
            if target > 0 and os.isatty(theirs[-1]):
                raise Unavailable("a terminal (the interpreter buffers it differently)")
        os.fstat(theirs[0])
        pid, conn = ZYGOTE.spawn(
            cmd[3:], dict(os.environ if env is None else env), os.getcwd(), theirs, start_new_session
        )
    except (Unavailable, OSError):
        for fd in ours.values():
            os.close(fd)
        raise Unavailable("") from None
    finally:
        for target, fd in enumerate(theirs):
            if target in ours:
                os.close(fd)  # the child has it now
    proc = ZygoteProcess(cmd, pid, conn, _reader(ours[1], text, bufsize) if 1 in ours else None)
    if 2 in ours:
        proc.stderr = _reader(ours[2], text, bufsize)
    return proc


def _reader(fd: int, text: bool, bufsize: int) -> IO[Any]:
    """The read end of a pipe as ``Popen`` wraps it."""
    if text and bufsize == 1:
        bufsize = -1  # line buffering is for writing; Popen reads with the default buffer
    raw = open(fd, "rb", bufsize)
    return io.TextIOWrapper(raw, encoding=_encoding()) if text else raw


def _encoding() -> str:
    return "utf-8" if sys.flags.utf8_mode else locale.getencoding()


def _text(data: str | bytes | None) -> str:
    if isinstance(data, str) or data is None:
        return data or ""
    return data.decode(_encoding()).replace("\r\n", "\n").replace("\r", "\n")


def _read_both(out: IO[bytes], err: IO[bytes], deadline: float) -> tuple[bytes, bytes]:
    """Everything written to both pipes until both close, as ``communicate`` reads it."""
    chunks: dict[int, list[bytes]] = {out.fileno(): [], err.fileno(): []}
    with selectors.DefaultSelector() as selector:
        for pipe in (out, err):
            selector.register(pipe.fileno(), selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired([], 0)
            for key, _ in selector.select(left):
                data = os.read(key.fd, 32768)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
    return b"".join(chunks[out.fileno()]), b"".join(chunks[err.fileno()])


def shutdown() -> None:
    """End this worker's zygote now (it also ends at exit); later starts are plain Popens."""
    ZYGOTE.shutdown()
