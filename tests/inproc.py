"""In-process hosts: the real app, served by uvicorn on a loopback socket, in a thread of the test.

``InProcessHost`` is a ``HostProcess`` without the process: it turns the same ``tether
serve`` flags into ``Settings`` with the CLI's own parser (``serve_settings``) and runs the
server ``tether serve`` runs (``tether.app.make_server``: a pre-bound socket, uvloop and
httptools, ``lifespan="on"``, no ``Date`` tick, no server header) in a thread with its own
event loop, leaving the test process's collector and logging alone (``long_lived=False``).
Clients talk to it over a real socket, so SSE, streaming and the official clients behave
as against a process; starting one costs tens of milliseconds instead of a second.
Crashes (SIGKILL), signals and exit codes, idle CPU and a second process on one data
directory still need ``HostProcess``.

``run_cli`` runs a ``tether`` command with click's ``CliRunner`` (no interpreter start),
and ``create_key`` makes a key through it, exactly as ``harness.create_key`` does
through a subprocess.
"""

from __future__ import annotations

import fcntl
import logging
import socket
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from click.testing import CliRunner
from harness import _DATABASES, Host

from tether.app import Server, make_server
from tether.cli.main import cli as tether_cli
from tether.cli.serve import serve_settings
from tether.settings import Settings

__all__ = ["InProcessHost", "create_key", "run_cli"]

_STARTUP_DEADLINE = 30.0
_STOP_DEADLINE = 15.0
#: the format ``tether.app.serve`` logs with
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _LiveHosts:
    """Process-wide state the in-process hosts share: the log level, and the threads they leave.

    ``tether serve`` logs at INFO (``logging.basicConfig``); while any in-process host
    runs, the root logger does too, and is put back when the last one stops. At that
    moment no thread a host started may still be alive.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.saved_level = logging.WARNING
        self.threads_before: set[threading.Thread] = set()

    def enter(self) -> None:
        with self.lock:
            if self.count == 0:
                root = logging.getLogger()
                self.saved_level = root.level
                root.setLevel(logging.INFO)
                self.threads_before = set(threading.enumerate())
            self.count += 1

    def leave(self) -> None:
        with self.lock:
            self.count -= 1
            if self.count:
                return
            logging.getLogger().setLevel(self.saved_level)
            born = [t for t in threading.enumerate() if t not in self.threads_before]
            left = [t for t in born if t.name.startswith(("tether-", "inproc-host"))]
        assert not left, f"in-process hosts left threads behind: {[t.name for t in left]}"


_LIVE = _LiveHosts()


class InProcessHost(Host):
    """One host on 127.0.0.1 served from a thread of the test process, with its own data directory.

    ``start`` returns once the lifespan has completed and the socket accepts; ``stop``
    shuts it down gracefully (streams end, the store closes, the SQLite lock is released)
    and returns 0, as ``tether serve`` exits after SIGTERM. ``restart`` is stop then start
    on the same data directory; there is no ``kill``, since only a process can crash.
    """

    def __init__(self, data_dir: Path, *args: str, database_url: str | None = None) -> None:
        super().__init__(data_dir, *args, database_url=database_url)
        self.settings: Settings | None = None
        self.returncode: int | None = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._log_handler: logging.Handler | None = None
        self._failure: BaseException | None = None

    # lifecycle -------------------------------------------------------------------------------

    def start(self) -> InProcessHost:
        assert self._thread is None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        server, sock, settings = make_server(serve_settings(self.serve_args()), long_lived=False)
        self._sock = sock
        self.settings = settings
        self._server = server
        self._failure = None
        self.returncode = None
        self._open_log()
        _LIVE.enter()
        name = f"inproc-host-{self.data_dir.name}"
        self._thread = threading.Thread(target=self._run, args=(server, sock), name=name, daemon=True)
        self._thread.start()
        ended = not self._wait_serving(server)
        if ended or not server.started:
            self._thread.join(_STOP_DEADLINE)
            self._finish()
            raise AssertionError(f"host did not start ({self._failure!r}):\n{self.log()}")
        first_start_key = server.endpoint.app.state.first_start_key
        if first_start_key is not None:
            self.dev_key = first_start_key
        self.url = settings.base_url
        return self

    def _wait_serving(self, server: Server) -> bool:
        """Wait until the server serves (True) or its thread ends (False), up to the start-up deadline."""
        assert self._thread is not None
        if not server.serving.wait(_STARTUP_DEADLINE):
            raise AssertionError(f"host did not start within {_STARTUP_DEADLINE} s:\n{self.log()}")
        return self._thread.is_alive() and server.started

    def _run(self, server: Server, sock: socket.socket) -> None:
        try:
            server.run(sockets=[sock])
            self.returncode = 0
        except SystemExit as exc:  # uvicorn's start-up failure
            self.returncode = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 - reported by start/stop
            self._failure = exc
            self.returncode = 1
        finally:
            server.serving.set()

    def stop(self) -> int:
        """Shut down gracefully (what SIGTERM does to ``tether serve``); returns 0 on a clean stop."""
        assert self._thread is not None and self._server is not None, "not running"
        self._server.request_exit()
        self._thread.join(_STOP_DEADLINE)
        if self._thread.is_alive():
            raise AssertionError(f"in-process host did not stop within {_STOP_DEADLINE} s")
        self._finish()
        if self._failure is not None:
            raise AssertionError(f"in-process host failed: {self._failure!r}") from self._failure
        assert self.returncode is not None
        return self.returncode

    def restart(self) -> InProcessHost:
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop if running and close the shared clients (fixture teardown)."""
        if self._thread is not None:
            self.stop()
        self.close_clients()

    def _finish(self) -> None:
        """After the server thread ended: nothing of this host may be left listening or locked."""
        port = self.settings.port if self.settings is not None else None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._thread = None
        self._server = None
        self._close_log()
        _LIVE.leave()
        if port:
            _assert_closed(port)
        if self.settings is not None and self.settings.database_url is None:
            _assert_unlocked(self.settings.data_dir / "tether.db.host-lock")

    # the host's log --------------------------------------------------------------------------

    def _open_log(self) -> None:
        handler = logging.FileHandler(self.log_path, mode="a", encoding="utf-8")
        handler.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter(_LOG_FORMAT))
        logging.getLogger().addHandler(handler)
        self._log_handler = handler

    def _close_log(self) -> None:
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None

    def __enter__(self) -> InProcessHost:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _assert_closed(port: int) -> None:
    """Nothing listens on ``port`` any more."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.settimeout(2)
        refused = probe.connect_ex(("127.0.0.1", port)) != 0
    finally:
        probe.close()
    assert refused, f"an in-process host still listens on port {port} after it stopped"


def _assert_unlocked(lock_path: Path) -> None:
    """The SQLite host lock is free: a later host (a process too) could serve this data directory."""
    if not lock_path.exists():
        return
    with open(lock_path, "rb") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AssertionError(f"{lock_path} is still locked after the host stopped") from None
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


# the CLI, in-process -------------------------------------------------------------------------


def run_cli(*args: str, data_dir: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``harness.cli`` without the interpreter start: the same command, run by click's ``CliRunner``.

    It runs in a thread of its own, so an event loop running in the test's thread does
    not stop the command's ``asyncio.run``.
    """
    env = {"TETHER_DATA_DIR": str(data_dir), "TETHER_DATABASE_URL": _DATABASES.get(data_dir)}

    def invoke() -> subprocess.CompletedProcess[str]:
        result = CliRunner().invoke(tether_cli, list(args), env=env, prog_name="tether", catch_exceptions=False)
        return subprocess.CompletedProcess(["tether", *args], result.exit_code, result.stdout, result.stderr)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="inproc-cli") as pool:
        done = pool.submit(invoke).result()
    if check and done.returncode != 0:
        raise AssertionError(f"tether {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def create_key(data_dir: Path, name: str, *extra: str) -> str:
    """A new key, as ``tether keys create --name NAME EXTRA...`` prints it (the last line)."""
    return run_cli("keys", "create", "--name", name, *extra, data_dir=data_dir).stdout.strip().splitlines()[-1]
