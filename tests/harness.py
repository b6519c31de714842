"""Real host processes for end-to-end tests: started on loopback port 0, killed for real.

``HostProcess`` runs ``python -m tether serve`` exactly as an operator would, reads the
URL it announces, and can SIGTERM or SIGKILL it and start it again on the same data
directory. ``wait_until`` polls a condition against a deadline instead of sleeping. Both it
and ``cli`` have their processes forked from this worker's zygote (``zygote``), which has
Tether imported already: the same process, most of a second of CPU cheaper each.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

import httpx
import zygote

T = TypeVar("T")
_SERVING = re.compile(r"serving on (\S+)")
_STARTUP_DEADLINE = 30.0


def wait_until(
    probe: Callable[[], T | None], *, timeout: float = 15.0, interval: float = 0.02, what: str = "condition"
) -> T:
    """The first truthy value of ``probe()``, or AssertionError once ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


#: the database each host's data directory stores in, when it is not SQLite
_DATABASES: dict[Path, str] = {}


def cli(*args: str, data_dir: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a ``tether`` command against a data directory (and its host's database)."""
    env = {**os.environ, "TETHER_DATA_DIR": str(data_dir)}
    if data_dir in _DATABASES:
        env["TETHER_DATABASE_URL"] = _DATABASES[data_dir]
    result = zygote.run([sys.executable, "-m", "tether", *args], env=env, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"tether {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def create_key(data_dir: Path, name: str, *extra: str) -> str:
    return cli("keys", "create", "--name", name, *extra, data_dir=data_dir).stdout.strip().splitlines()[-1]


class Host:
    """What a test reaches a host through, real process or in-process: its URL, clients, log and data.

    ``url`` is where it serves, ``dev_key`` the key it made at its first start (None when
    its store already had keys).
    """

    def __init__(self, data_dir: Path, *args: str, database_url: str | None = None) -> None:
        self.data_dir = data_dir
        self.database_url = database_url
        if database_url is not None:
            _DATABASES[data_dir] = database_url
        self.args = list(args)
        self.url = ""
        self.dev_key: str | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-host.log"
        self._clients: dict[str | None, httpx.Client] = {}

    def start(self) -> Self:
        """Start serving; returns once the host answers at ``url``."""
        raise NotImplementedError

    def serve_args(self) -> list[str]:
        """The ``tether serve`` flags this host runs with: loopback, port 0, its data and its own flags."""
        args = ["--host", "127.0.0.1", "--port", "0", "--data-dir", str(self.data_dir), *self.args]
        if self.database_url is not None:
            args += ["--database-url", self.database_url]
        return args

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.Client:
        """A new client of this host (close it, or use ``http`` for a shared one)."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def http(self, key: str | None = None) -> httpx.Client:
        """A client shared by the test and closed with the host; follows restarts."""
        client = self._clients.get(key)
        if client is None or str(client.base_url).rstrip("/") != self.url:
            if client is not None:
                client.close()
            client = self._clients[key] = self.client(key)
        return client

    def close_clients(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stored_bytes(self) -> bytes:
        """Everything the host keeps at rest: its data directory and, if any, its database."""
        files = b"".join(p.read_bytes() for p in self.data_dir.iterdir() if p.is_file())
        if self.database_url is None:
            return files
        dump = subprocess.run(
            ["pg_dump", "--data-only", self.database_url], capture_output=True, timeout=60, check=True
        )
        return files + dump.stdout


class HostProcess(Host):
    """One ``tether serve`` process on 127.0.0.1 with its own data directory."""

    def __init__(self, data_dir: Path, *args: str, database_url: str | None = None) -> None:
        super().__init__(data_dir, *args, database_url=database_url)
        self.proc: subprocess.Popen[str] | zygote.ZygoteProcess | None = None
        self.startups: list[str] = []

    def start(self) -> HostProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "a")
        cmd = [sys.executable, "-m", "tether", "serve", *self.serve_args()]
        self.proc = zygote.popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1, start_new_session=True)
        log.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + _STARTUP_DEADLINE
        lines = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("{"):  # --log-format json: the same facts, as members
                said = json.loads(line)
                self.dev_key = said.get("api_key", self.dev_key)
                if said.get("event") == "serving":
                    self.url = said["url"]
                    self.startups.append(line.strip())
                    return self
            if line.startswith("tk_"):
                self.dev_key = line.strip()
            match = _SERVING.search(line)
            if match:
                self.url = match.group(1)
                self.startups.append(line.strip())
                return self
        self.kill()
        raise AssertionError(f"host did not start:\n{''.join(lines)}\n{self.log_path.read_text()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, exactly like a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._close_pipe()

    def stop(self) -> int:
        """SIGTERM and wait for a graceful exit; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("host ignored SIGTERM for 15 s") from None
        self._close_pipe()
        return self.proc.returncode

    def restart(self) -> HostProcess:
        self.kill()
        return self.start()

    def _close_pipe(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
