"""The servers under test: each its own process on 127.0.0.1, port 0, ready when it answers.

``SERVERS`` names every slot the harness knows. ``start(name, workdir)`` returns a running
:class:`ServerProcess` or raises :class:`Skipped` with the reason a slot cannot run here
(Tether on PostgreSQL in this build, the SDK when its extras are not installed).
A process is "ready" when it has announced ``serving on URL`` on stdout *and* answered an
HTTP request: Tether prints its line from the app's lifespan, a moment before uvicorn
listens, so the announcement alone is not proof.

Every slot runs on uvicorn (uvloop, httptools) but the ``-granian`` ones, which run the
same app under granian (``bench/apps/granian_apps.py``). granian serves from a worker
process it forks, so a server's CPU time and RSS here are those of its whole process tree.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

BENCH = Path(__file__).resolve().parent
APPS = BENCH / "apps"
_SERVING = re.compile(r"serving on (http://\S+)")
_CLK_TCK = os.sysconf("SC_CLK_TCK")
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _die_with_parent() -> None:
    """In the child: SIGTERM when the harness dies, even by SIGKILL (Linux prctl)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Skipped(Exception):
    """This slot cannot run on this machine or build; the message says why."""


@dataclass(frozen=True)
class Slot:
    name: str
    label: str
    rpc_path: str
    authenticated: bool
    durable: bool  # Tether: runs survive restarts, so restart/rest scenarios apply
    a2a_1_0: bool = False  # speaks A2A 1.0 beside 0.3 (the send10/get10 scenarios apply); the SDK 0.3.26 does not
    stack: str = "uvicorn"  # the ASGI server: "uvicorn" (uvloop, httptools) or "granian"


SERVERS: dict[str, Slot] = {
    s.name: s
    for s in (
        Slot("tether-sqlite", "Tether, SQLite (fsync'd)", "/v1/a2a", True, True, True),
        Slot("tether-postgres", "Tether, PostgreSQL", "/v1/a2a", True, True, True),
        Slot("sdk-memory", "a2a-sdk 0.3.26, InMemoryTaskStore", "/", False, False),
        Slot("sdk-sqlite", "a2a-sdk 0.3.26, DatabaseTaskStore (SQLite)", "/", False, False),
        Slot("bare", "bare ASGI (ceiling)", "/", False, False),
        Slot("tether-sqlite-granian", "Tether, SQLite (fsync'd), on granian", "/v1/a2a", True, True, True, "granian"),
        Slot("bare-granian", "bare ASGI on granian (its ceiling)", "/", False, False, stack="granian"),
        # not durable: its commits are written nowhere (apps/storeless_host.py), the request path's own bound
        Slot("tether-storeless", "Tether, commits written nowhere (the request path's bound)", "/v1/a2a", True, False),
        # SQLite's writer on a thread, not in a process of its own (apps/thread_writer_host.py)
        Slot("tether-sqlite-thread", "Tether, SQLite (fsync'd), writer on a thread", "/v1/a2a", True, True, True),
    )
}


def process_tree(pid: int) -> list[int]:
    """The process and its living descendants (granian's worker is its supervisor's child)."""
    tree, index = [pid], 0
    while index < len(tree):
        parent = tree[index]
        index += 1
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    tree += [int(child) for child in f.read().split()]
        except OSError:
            continue
    return tree


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime


def proc_rss_mb(pid: int) -> float | None:
    """Resident set size now (VmRSS) of the process and its descendants, in MB."""
    own = _rss_mb(pid)
    if own is None:
        return None
    return round(own + sum(_rss_mb(child) or 0.0 for child in process_tree(pid)[1:]), 1)


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of every thread of the process and its living descendants so far."""
    own = _cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(_cpu_seconds(child) or 0.0 for child in process_tree(pid)[1:])


def system_busy_seconds() -> float:
    """CPU time every core of the machine has spent busy since boot (``/proc/stat``)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    guest = sum(fields[8:10]) if len(fields) > 9 else 0  # already counted in user/nice
    return (sum(fields) - idle - guest) / _CLK_TCK


class Background:
    """How much CPU the rest of the machine used while a measurement ran.

    Busy time of the whole machine, less the server's, the harness's and its finished
    children's (wrk, py-spy): what other processes took from the two cores. For
    ``tether-postgres`` the database server is among the "others".
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> Background:
        self.t0 = time.monotonic()
        self.busy0 = system_busy_seconds()
        self.server0 = proc_cpu_seconds(self.pid) or 0.0
        self.own0 = sum(os.times()[:4])
        return self

    def __exit__(self, *exc: Any) -> None:
        elapsed = time.monotonic() - self.t0
        busy = system_busy_seconds() - self.busy0
        server = (proc_cpu_seconds(self.pid) or 0.0) - self.server0
        own = sum(os.times()[:4]) - self.own0
        self.server_pct = round(100 * server / elapsed, 1) if elapsed > 0 else 0.0
        self.others_pct = round(max(0.0, 100 * (busy - server - own) / elapsed), 1) if elapsed > 0 else 0.0


def cpu_percent(pid: int, seconds: float) -> float | None:
    """Average CPU use of one process over ``seconds`` (100 = one full core)."""
    start_cpu, start = proc_cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    end_cpu, end = proc_cpu_seconds(pid), time.monotonic()
    if start_cpu is None or end_cpu is None:
        return None
    return round(100 * (end_cpu - start_cpu) / (end - start), 3)


def quiet(*, below_pct: float = 15.0, window: float = 0.5, timeout: float = 30.0) -> float:
    """Wait until the whole machine uses under ``below_pct`` of a core over ``window``; returns seconds waited.

    Before a measurement: a database still checkpointing, or a server still tearing down
    the last scenario's connections, would otherwise take its share of the two cores.
    """
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        busy0, t0 = system_busy_seconds(), time.monotonic()
        time.sleep(window)
        if 100 * (system_busy_seconds() - busy0) / (time.monotonic() - t0) < below_pct:
            break
    return time.monotonic() - start


def settle(pid: int, *, below_pct: float = 5.0, window: float = 0.2, timeout: float = 10.0) -> float:
    """Wait until the process uses under ``below_pct`` of a core over ``window``; returns seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        used = cpu_percent(pid, window)
        if used is None or used < below_pct:
            break
    return time.monotonic() - start


class RssSampler:
    """Samples a process's RSS (with its descendants') in a thread; ``peak`` is the largest value seen.

    The process tree is read once, on entry: a sample then costs one read per process, not
    one per thread, so the sampler takes no more from the stream client it shares a process with.
    """

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = 0.0
        self._tree = [pid]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        sizes = [_rss_mb(pid) for pid in self._tree]
        if sizes[0] is not None:
            self.peak = max(self.peak, round(sum(size or 0.0 for size in sizes), 1))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._tree = process_tree(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


@dataclass
class ServerProcess:
    slot: Slot
    cmd: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    key: str | None = None
    url: str = ""
    proc: subprocess.Popen[str] | None = None
    #: seconds from spawn to the "serving on" line, and to the first HTTP answer
    announced_s: float = 0.0
    ready_s: float = 0.0
    announcement: str = ""
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def rpc_url(self) -> str:
        return self.url + self.slot.rpc_path

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def spawn(self) -> float:
        """Start the process; returns the monotonic time just before the spawn."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self._lines = queue.Queue()
        log = open(self.log_path, "a")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
            env={**os.environ, **self.env},
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log.close()
        threading.Thread(target=self._pump, args=(self.proc, self._lines), daemon=True).start()
        return t0

    @staticmethod
    def _pump(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        """Its own process's lines into its own queue: a killed life's EOF must not end the next one's wait."""
        assert proc.stdout is not None
        with proc.stdout:  # closed at EOF: the process has gone
            for line in proc.stdout:
                lines.put(line.rstrip("\n"))
        lines.put(None)

    def wait_announced(self, t0: float, timeout: float) -> None:
        """Read stdout until ``serving on URL`` (and Tether's first-start key)."""
        deadline = t0 + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"{self.slot.name}: no 'serving on' line after {timeout}s; see {self.log_path}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(
                    f"{self.slot.name}: exited with {self.proc.wait() if self.proc else '?'} before serving; see "
                    f"{self.log_path}"
                )
            if line.startswith("tk_") and self.key is None:
                self.key = line.strip()
            match = _SERVING.search(line)
            if match:
                self.url = match.group(1).rstrip("/")
                self.announcement = line
                self.announced_s = time.monotonic() - t0
                return

    def wait_answering(self, t0: float, timeout: float, probe: tuple[str, str, bytes | None] | None = None) -> float:
        """Poll until an HTTP request is answered 200; returns seconds since ``t0``.

        ``probe`` is (method, path, body); by default GET the agent card.
        """
        method, path, body = probe or ("GET", "/.well-known/agent-card.json", None)
        headers = {**self.headers(), "Content-Type": "application/json"}
        deadline = t0 + timeout
        with httpx.Client(timeout=5.0) as client:
            while True:
                try:
                    if client.request(method, self.url + path, content=body, headers=headers).status_code == 200:
                        return time.monotonic() - t0
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{self.slot.name}: not answering {method} {path} after {timeout}s; see {self.log_path}"
                    )
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"{self.slot.name}: exited with {self.proc.returncode}; see {self.log_path}")
                time.sleep(0.005)

    def start(self, timeout: float = 60.0) -> ServerProcess:
        t0 = self.spawn()
        self.wait_announced(t0, timeout)
        self.ready_s = self.wait_answering(t0, timeout)
        return self

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``grace`` seconds."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL to its process group: a granian worker dies with its supervisor (each server leads its own)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)


#: set by ``run.py --tether-src``: run Tether from that source tree instead of the installed one
TETHER_SRC: Path | None = None


def tether_process(
    slot: Slot,
    data_dir: Path,
    logs: Path,
    *extra: str,
    python: str = sys.executable,
    src: Path | None = None,
    entry: tuple[str, ...] = ("-m", "tether"),
) -> ServerProcess:
    """``tether serve`` on ``data_dir`` from ``src`` (default: ``TETHER_SRC``, else the installed
    package); ``entry`` is how Python starts it (a script that wraps the CLI, for the harness)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [python, *entry, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir), *extra]
    src = src or TETHER_SRC
    env = {"PYTHONPATH": str(src)} if src is not None else {}
    return ServerProcess(slot, cmd, logs / f"{slot.name}-{data_dir.name}.log", env=env)


def granian_process(slot: Slot, factory: str, logs: Path, log_name: str, env: dict[str, str]) -> ServerProcess:
    """``python -m granian`` serving ``bench/apps/granian_apps.py:<factory>`` as uvicorn serves the others:
    one worker, uvloop, HTTP/1.1, warnings only, no access log, the listen backlog Tether's ``serve`` sets.

    granian binds its socket itself and cannot be handed one, so the port is one the kernel
    just gave out for port 0, released for granian to bind: a race, lost only if another
    process binds that very port in the moment between.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "granian",
        "--interface",
        "asgi",
        "--factory",
        "--working-dir",
        str(APPS),
        "--workers",
        "1",
        "--loop",
        "uvloop",
        "--http",
        "1",
        "--log-level",
        "warning",
        "--no-access-log",
        "--backlog",
        "2048",
        f"granian_apps:{factory}",
    ]
    env = {**env, "GRANIAN_HOST": "127.0.0.1", "GRANIAN_PORT": str(port)}
    return ServerProcess(slot, cmd, logs / log_name, env=env)


def granian_available() -> str | None:
    """None if granian is installed here, else how to install it."""
    try:
        import granian  # noqa: F401
    except ImportError:
        return "granian is not installed here: pip install -e '.[bench]'"
    return None


def sdk_available(store: str) -> str | None:
    """None if the SDK server can run with this store here, else why not."""
    probe = "import a2a.server.apps, sse_starlette, uvicorn"
    if store == "sqlite":
        probe += "; import sqlalchemy.ext.asyncio, aiosqlite"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        package = "a2a-sdk[http-server,sqlite]==0.3.26"
        return f"{package} is not installed here: pip install '{package}'"
    return None


def _postgres_reachable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), timeout=1.0):
            return True
    except OSError:
        return False


def pg_admin_url(explicit: str | None = None) -> str:
    """The PostgreSQL server to make throwaway databases on (an admin DSN)."""
    return (
        explicit
        or os.environ.get("TETHER_BENCH_PG_URL")
        or os.environ.get("TETHER_TEST_POSTGRES_URL")
        or DEFAULT_PG_URL
    )


def _pg_admin(url: str, *statements: str) -> None:
    """Run admin statements with asyncpg (Tether's own driver) or, failing that, psql."""
    try:
        import asyncpg  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        psql = shutil.which("psql")
        if psql is None:
            raise RuntimeError("neither asyncpg nor psql is installed to create a database") from None
        for statement in statements:
            subprocess.run(
                [psql, url, "-v", "ON_ERROR_STOP=1", "-qc", statement], check=True, capture_output=True, timeout=60
            )
        return

    async def run() -> None:
        conn = await asyncpg.connect(url, timeout=5)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


#: slots that run ``tether serve`` through a script that replaces one piece of it
_WRAPPED = {"tether-storeless": "storeless_host.py", "tether-sqlite-thread": "thread_writer_host.py"}


class Launcher:
    """Starts slots, each with a fresh store: a data directory, and for PostgreSQL a new database.

    Databases made here are named ``tether_bench_<hex>`` and dropped by :meth:`close`.
    """

    def __init__(self, workdir: Path, pg_url: str | None = None) -> None:
        self.workdir = workdir
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pg_admin = pg_admin_url(pg_url)
        self.databases: list[str] = []

    def fresh_database(self) -> str:
        name = f"tether_bench_{uuid.uuid4().hex[:12]}"
        _pg_admin(self.pg_admin, f'CREATE DATABASE "{name}"')
        self.databases.append(name)
        return urlunsplit(urlsplit(self.pg_admin)._replace(path="/" + name))

    def close(self) -> None:
        for name in self.databases:
            try:
                _pg_admin(self.pg_admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            except Exception as exc:  # noqa: BLE001 - cleanup must go on
                print(f"bench: could not drop database {name}: {exc}", file=sys.stderr)
        self.databases.clear()

    def tether(self, name: str, tag: str, *extra: str, **how: Any) -> ServerProcess:
        """An unstarted Tether of slot ``name`` on a store of its own (raises Skipped); ``extra``
        are more ``tether serve`` options, ``how`` goes to :func:`tether_process`."""
        slot = SERVERS[name]
        if name == "tether-sqlite":
            return tether_process(slot, self.workdir / f"{name}-{tag}", self.logs, *extra, **how)
        if name == "tether-sqlite-granian":
            return self.tether_on_granian(slot, tag, *extra, **how)
        if name in _WRAPPED:
            entry = (str(APPS / _WRAPPED[name]),)
            return tether_process(slot, self.workdir / f"{name}-{tag}", self.logs, *extra, entry=entry, **how)
        assert name == "tether-postgres"
        if _postgres_reachable(self.pg_admin):
            try:
                url = self.fresh_database()
            except Exception as exc:  # noqa: BLE001 - any reason is a reason to skip
                raise Skipped(f"cannot create a database on {self.pg_admin}: {exc}") from None
        else:
            url = urlunsplit(urlsplit(self.pg_admin)._replace(path="/tether_bench"))
        return tether_process(slot, self.workdir / f"{name}-{tag}", self.logs, "--database-url", url, *extra, **how)

    def tether_on_granian(self, slot: Slot, tag: str, *extra: str, src: Path | None = None) -> ServerProcess:
        """``tether serve --data-dir ... EXTRA`` as granian serves it (raises Skipped without granian)."""
        missing = granian_available()
        if missing:
            raise Skipped(missing)
        data_dir = self.workdir / f"{slot.name}-{tag}"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {"TETHER_SERVE_ARGS": json.dumps(["--data-dir", str(data_dir), *extra])}
        src = src or TETHER_SRC
        if src is not None:
            env["PYTHONPATH"] = str(src)
        return granian_process(slot, "tether", self.logs, f"{slot.name}-{data_dir.name}.log", env)

    def start_tether(self, name: str, tag: str, *extra: str, **how: Any) -> ServerProcess:
        server = self.tether(name, tag, *extra, **how)
        try:
            return server.start(timeout=60)
        except RuntimeError as exc:
            if name != "tether-postgres":
                raise
            server.kill()
            log = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
            if "this build stores in SQLite only" in log:
                raise Skipped("this build stores in SQLite only") from None
            if not _postgres_reachable(self.pg_admin):
                raise Skipped(f"no PostgreSQL server reachable at {self.pg_admin} (set TETHER_BENCH_PG_URL)") from None
            last = [ln for ln in log.splitlines() if ln.strip()][-1:] or [str(exc)]
            raise Skipped(f"tether serve --database-url failed to start: {last[0][:300]}") from None

    def start(self, name: str) -> ServerProcess:
        """Start one slot with a fresh store; raises Skipped when it cannot run here."""
        if name.startswith("tether-"):
            return self.start_tether(name, "live")
        if name in ("sdk-memory", "sdk-sqlite"):
            store = name.removeprefix("sdk-")
            missing = sdk_available(store)
            if missing:
                raise Skipped(missing)
            cmd = [sys.executable, str(APPS / "sdk_server.py"), "--store", store]
            if store == "sqlite":
                (self.workdir / name).mkdir(parents=True, exist_ok=True)
                cmd += ["--db", str(self.workdir / name / "tasks.db")]
            return ServerProcess(SERVERS[name], cmd, self.logs / f"{name}.log").start()
        if name == "bare":
            return ServerProcess(
                SERVERS[name], [sys.executable, str(APPS / "bare_server.py")], self.logs / "bare.log"
            ).start()
        if name == "bare-granian":
            missing = granian_available()
            if missing:
                raise Skipped(missing)
            return granian_process(SERVERS[name], "bare", self.logs, "bare-granian.log", {}).start()
        raise KeyError(name)
