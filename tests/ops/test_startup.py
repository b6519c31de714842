"""A host that cannot start says so in one line, says what to do, and exits non-zero: no traceback.

Each case runs ``tether serve`` as a real process, exactly as an operator would, and
reads its whole stderr.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from harness import HostProcess
from pg import admin_url, database_url, fresh_database


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    return subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The failure's only stderr line, after checking the exit status and the absence of a traceback."""
    assert result.returncode != 0, result
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(("tether: error: ", "error: ")), lines
    return lines[0]


@pytest.fixture
def running(tmp_path: Path) -> Iterator[HostProcess]:
    host = HostProcess(tmp_path / "data").start()
    try:
        yield host
    finally:
        host.kill()
        host.close_clients()


def test_a_port_in_use_names_the_port_and_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--data-dir", str(tmp_path / "data"), "--port", str(port))
    line = one_line(result)
    assert f"port {port} on 127.0.0.1 is already in use" in line and "--port" in line
    assert result.returncode == 3


def test_a_second_host_on_one_data_directory_is_one_line(running: HostProcess) -> None:
    line = one_line(serve("--data-dir", str(running.data_dir)))
    assert "another Tether host is serving" in line and "--data-dir" in line


def test_a_foreign_host_key_is_one_line(running: HostProcess, tmp_path: Path) -> None:
    running.kill()
    other = tmp_path / "other.key"
    other.write_bytes(os.urandom(32))
    line = one_line(serve("--data-dir", str(running.data_dir), "--secret-key-file", str(other)))
    assert "--secret-key-file" in line


def test_a_missing_postgresql_database_is_one_line(tmp_path: Path) -> None:
    with fresh_database():  # skips (or fails under CI) when there is no PostgreSQL to talk to
        pass
    missing = database_url(admin_url(), "tether_test_never_created")
    line = one_line(serve("--data-dir", str(tmp_path / "data"), "--database-url", missing))
    assert 'database "tether_test_never_created" does not exist' in line
    assert "createdb" in line and "--database-url" in line


def test_a_missing_postgresql_role_is_one_line_that_names_the_role(tmp_path: Path) -> None:
    with fresh_database():
        pass
    server = urlsplit(admin_url())
    stranger = urlunsplit(server._replace(netloc=f"tether_test_no_such_role@{server.hostname}:{server.port or 5432}"))
    line = one_line(serve("--data-dir", str(tmp_path / "data"), "--database-url", stranger))
    assert 'role "tether_test_no_such_role" does not exist' in line
    assert "`createuser tether_test_no_such_role`" in line and "--database-url" in line
    assert "createdb" not in line, "a missing role is not a missing database"


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot write: a read-only tmpfs for root (which ignores modes), else mode 0500."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
        yield folder
        folder.chmod(0o700)
        return
    mount = ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)]
    mounted = subprocess.run(mount, capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"root ignores file modes, and a read-only tmpfs cannot be mounted here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("inside", ["", "data"], ids=["the-directory", "a-new-one-inside"])
def test_a_read_only_data_directory_is_one_line_that_names_the_path(read_only: Path, inside: str) -> None:
    data = read_only / inside
    line = one_line(serve("--data-dir", str(data)))
    assert line.startswith(f"tether: error: cannot write {data}"), line
    assert "--data-dir" in line and "OSError" not in line and "Errno" not in line


def test_all_interfaces_without_a_public_url_is_refused(tmp_path: Path) -> None:
    result = serve("--host", "0.0.0.0", "--data-dir", str(tmp_path / "data"))
    assert "--public-url" in one_line(result)
    assert not (tmp_path / "data").exists(), "refused before touching anything"


def test_debug_brings_the_traceback_back(running: HostProcess) -> None:
    result = serve("--data-dir", str(running.data_dir), "--log-level", "debug")
    assert result.returncode == 3
    assert "Traceback" in result.stderr and "StoreInUse" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("tether: error: another Tether host is serving")
