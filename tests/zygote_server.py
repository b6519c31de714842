"""The zygote's side (``zygote`` is the tests' side): import Tether once, fork a ``python -m tether`` per request.

Runs in its own interpreter, started by ``zygote.Zygote``; never imported by pytest. ``serve``
imports ``tether.app`` and the CLI, checks that doing so left one thread and no event loop,
then answers requests on the listening socket it was handed. A request is one message of
JSON (``args``, ``env``, ``cwd``, ``new_session``) carrying three descriptors (the child's
0, 1 and 2). The zygote forks; the parent closes its copies of those descriptors and answers
``pid N``; when the child ends, ``exit N`` (Popen's convention: ``-N`` for signal N). The
child stays a zombie until the requester closes the connection, so its pid (and process
group) cannot be reused while a test may still signal it, as with ``subprocess.Popen``.

After importing (and ``PRELOAD``, what ``tether serve`` imports once it serves) the zygote
freezes its objects out of the garbage collector (``gc.freeze``): a child's collections then
leave the shared pages alone, which halves what a short-lived child costs.

In a child, ``serve`` *returns* (its request applied by ``_become``) and the boot code in
``zygote`` runs ``tether`` as ``python -m tether`` does, exiting through the interpreter's
normal exit. What a fresh process would have read differently is handled here:

- the environment is replaced in place (``os.environ`` keeps its identity, so defaults bound
  to it stay live), ``TZ`` re-read, ``tempfile``'s cached directory forgotten, ``wsgiref``'s
  snapshot of the environment taken again;
- every ``random.Random`` at module level of ``tether`` (``tether.ids`` makes ids from one)
  is reseeded from the OS, like ``random`` itself (which reseeds at fork);
- a request whose environment differs from the zygote's in a variable that the interpreter
  reads at start (``PYTHON*``, locale, ``HOME``) or that any module read while the zygote
  imported (recorded: ``OTEL_PROPAGATORS``, ``PROMETHEUS_*`` …) is refused (``refuse``),
  and the requester starts that process with ``subprocess.Popen``.

The zygote ends when the control connection closes (its worker ended), reaping what ended
and leaving running children running, as their worker's exit would.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import os
import random
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from typing import Any

#: environment variables the interpreter reads at start (a child forked from the zygote cannot honour them)
STARTUP_PREFIXES = ("PYTHON", "_PYTHON", "LC_", "LANG")
STARTUP_NAMES = frozenset({"HOME", "LANGUAGE"})
_HEADER = struct.Struct("!I")
#: what ``tether serve`` imports only once it serves (uvicorn picks its loop and protocols), imported too
PRELOAD = (
    "runpy",
    "uvicorn.loops.uvloop",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.websockets_sansio_impl",
)


class _RecordingEnviron(os._Environ):  # type: ignore[type-arg]
    """``os.environ``'s class while the zygote imports: notes each variable read."""

    read: set[str] = set()

    def __getitem__(self, key: str) -> str:
        _RecordingEnviron.read.add(key)
        return super().__getitem__(key)  # type: ignore[no-any-return]


def _import_tether() -> frozenset[str]:
    """Import what every ``tether`` process imports; the environment variables read meanwhile."""
    import wsgiref.handlers  # noqa: F401  (snapshots the whole environment: not recorded, retaken in each child)

    os.environ.__class__ = _RecordingEnviron
    try:
        import tether.app  # noqa: F401
        import tether.cli.main  # noqa: F401

        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                pass  # that host imports something else then, itself
    finally:
        os.environ.__class__ = os._Environ
    return frozenset(_RecordingEnviron.read)


def _unfit() -> str | None:
    """Why this interpreter may not fork children that pass for fresh ones, if it may not."""
    threads = os.listdir("/proc/self/task")
    if len(threads) != 1 or threading.active_count() != 1:
        return f"importing Tether left {len(threads)} threads"
    policy = getattr(asyncio.events, "_event_loop_policy", None)  # None: no loop was ever asked for
    if asyncio.events._get_running_loop() is not None or getattr(getattr(policy, "_local", None), "_loop", None):
        return "importing Tether made an event loop"
    return None


class _Refused(Exception):
    """A request this zygote answered ``refuse``."""


class _Child:
    """One forked child: its pidfd, the requester's connection (None once it hung up) and its status."""

    def __init__(self, pid: int, conn: socket.socket | None) -> None:
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.conn = conn
        self.returncode: int | None = None


class _Zygote:
    def __init__(self, listener: socket.socket, control: socket.socket, import_reads: frozenset[str]) -> None:
        self.listener = listener
        self.control = control
        self.import_reads = import_reads
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, _Child] = {}  # by pidfd
        self.signals = {
            sig: signal.getsignal(sig) for sig in signal.valid_signals() if sig not in (signal.SIGKILL, signal.SIGSTOP)
        }
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        self.environ = dict(os.environ)

    def serve(self) -> dict[str, Any] | None:
        """Answer requests until the control connection closes (None) or, in a forked child, its request."""
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.selector.register(self.control, selectors.EVENT_READ, ("control", None))
        while True:
            for key, _ in self.selector.select():
                kind, child = key.data
                if kind == "accept":
                    conn, _ = self.listener.accept()
                    request = self._request(conn)
                    if request is not None:
                        return request  # in the child
                elif kind == "control":
                    if not self.control.recv(1):
                        return None
                # an event of this batch may be for a descriptor closed by an earlier one (its number reused)
                elif kind == "pidfd" and self.children.get(key.fd) is child and child.returncode is None:
                    self._ended(child)
                elif kind == "conn" and child.conn is key.fileobj:
                    self._hung_up(child)

    def _request(self, conn: socket.socket) -> dict[str, Any] | None:
        fds: list[int] = []
        try:
            conn.settimeout(10)
            head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
            body = _read_exactly(conn, _HEADER.unpack(head)[0])
            request: dict[str, Any] = json.loads(body)
            refused = self._refusal(request["env"])
            if refused or len(fds) != 3:
                conn.sendall(f"refuse {refused or 'expected 3 descriptors'}\n".encode())
                raise _Refused
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except Exception as exc:
            if not isinstance(exc, _Refused):
                traceback.print_exc()
            conn.close()
            for fd in fds:
                os.close(fd)
            return None
        if pid == 0:
            try:
                self._become(request, fds, conn)
            except BaseException:
                traceback.print_exc()
                os._exit(70)
            return request
        for fd in fds:
            os.close(fd)
        child = _Child(pid, conn)
        self.children[child.pidfd] = child
        self.selector.register(child.pidfd, selectors.EVENT_READ, ("pidfd", child))
        self.selector.register(conn, selectors.EVENT_READ, ("conn", child))
        conn.sendall(f"pid {pid}\n".encode())
        return None

    def _refusal(self, env: dict[str, str]) -> str:
        """The variables whose value in ``env`` a child forked here could not honour, as a sentence ('' if none)."""
        names = set(env) | set(self.environ)
        differ = sorted(
            name
            for name in names
            if env.get(name) != self.environ.get(name)
            and (name.startswith(STARTUP_PREFIXES) or name in STARTUP_NAMES or name in self.import_reads)
        )
        return f"read at start or import: {', '.join(differ)}" if differ else ""

    def _ended(self, child: _Child) -> None:
        """The child ended: tell its requester, who reaps it by hanging up; or reap it now."""
        info = os.waitid(os.P_PIDFD, child.pidfd, os.WEXITED | os.WNOWAIT)
        assert info is not None
        child.returncode = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        self.selector.unregister(child.pidfd)
        if child.conn is None:
            self._reap(child)
            return
        try:
            child.conn.sendall(f"exit {child.returncode}\n".encode())
        except OSError:
            self._hung_up(child)

    def _hung_up(self, child: _Child) -> None:
        """The requester closed its connection: it knows the status (or never will); reap once ended."""
        if child.conn is not None:
            self.selector.unregister(child.conn)
            child.conn.close()
            child.conn = None
        if child.returncode is not None:
            self._reap(child)

    def _reap(self, child: _Child) -> None:
        os.waitpid(child.pid, 0)
        os.close(child.pidfd)
        del self.children[child.pidfd]

    def close(self) -> None:
        """At the end: reap the children that ended; running ones run on, reparented, as after their worker."""
        for child in list(self.children.values()):
            if child.conn is not None:
                self._hung_up(child)
            if child.returncode is None and os.waitpid(child.pid, os.WNOHANG)[0]:
                os.close(child.pidfd)

    def _become(self, request: dict[str, Any], fds: list[int], conn: socket.socket) -> None:
        """In the child: turn into the process ``python -m tether *args`` started as requested would be."""
        if request["new_session"]:
            os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        # the zygote's descriptors, each through its owner, so none is closed twice later
        conn.close()
        for child in self.children.values():
            os.close(child.pidfd)
            if child.conn is not None:
                child.conn.close()
        self.selector.close()
        self.listener.close()
        self.control.close()
        for sig, handler in self.signals.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        os.chdir(request["cwd"])
        if not sys.flags.safe_path:
            sys.path[0] = os.getcwd()
        sys.argv = ["-m", *request["args"]]
        sys.orig_argv = [sys.executable, "-m", "tether", *request["args"]]
        _refresh_module_state()


def _refresh_module_state() -> None:
    """What modules computed at import from the environment or the OS, recomputed in the child."""
    random.seed()
    for name, module in list(sys.modules.items()):
        if name == "tether" or name.startswith("tether."):
            for value in list(vars(module).values()):
                if isinstance(value, random.Random) and not isinstance(value, random.SystemRandom):
                    value.seed(os.urandom(32))
    import tempfile

    tempfile.tempdir = None
    handlers = sys.modules.get("wsgiref.handlers")
    if handlers is not None:
        handlers.BaseHandler.os_environ = handlers.read_environ()
    sys.modules.pop(__name__, None)


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("request cut short")
        data += chunk
    return bytes(data)


def serve(listener_fd: int, control_fd: int) -> dict[str, Any] | None:
    """Be the zygote: None when it is to exit, a request when this is a forked child that is to run it."""
    listener = socket.socket(fileno=listener_fd)
    control = socket.socket(fileno=control_fd)
    if not sys.flags.safe_path:
        sys.path[0] = os.getcwd()  # what ``-m`` puts first (``-c`` put ''), so imports resolve as in a child
    import_reads = _import_tether()
    unfit = _unfit()
    if unfit is not None:
        print(f"zygote: {unfit}; not serving", file=sys.stderr, flush=True)
        return None
    print(f"zygote: serving; variables read at import: {', '.join(sorted(import_reads))}", file=sys.stderr)
    gc.collect()
    gc.freeze()  # what every child shares stays out of its collections: no copy-on-write of it all
    zygote = _Zygote(listener, control, import_reads)
    request = zygote.serve()
    if request is None:
        zygote.close()
    return request
