"""``/healthz`` and ``/readyz``: probes a load balancer or kubelet can use with no key.

Readiness is checked against real failures: a PostgreSQL database that stops taking
connections, and a real ``tether serve`` process shutting down after SIGTERM.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness import HostProcess, wait_until
from inproc import InProcessHost
from pg import _admin, _run, admin_url, fresh_database


@pytest.fixture
def sqlite_host(tmp_path: Path) -> Iterator[InProcessHost]:
    with InProcessHost(tmp_path / "data") as host:
        yield host


def test_probes_need_no_key_and_report_every_check(sqlite_host: InProcessHost) -> None:
    client = sqlite_host.http()
    alive = client.get("/healthz")
    assert (alive.status_code, alive.json()) == (200, {"status": "alive"})
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "checks": {"store": "ok"}}
    assert ready.headers["cache-control"] == "no-store" and "date" in ready.headers
    assert client.head("/readyz").status_code == 200


def test_probes_refuse_other_methods_naming_the_served_ones(sqlite_host: InProcessHost) -> None:
    refused = sqlite_host.http().post("/readyz")
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, HEAD"


def _allow_connections(database: str, allowed: bool) -> None:
    statements = [f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(allowed).lower()}']
    if not allowed:  # and end the ones the host holds
        statements.append(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}' "
            "AND pid <> pg_backend_pid()"
        )
    _run(lambda: _admin(admin_url(), *statements))


def test_readyz_is_503_naming_the_store_while_postgresql_refuses(tmp_path: Path) -> None:
    with fresh_database() as url:
        database = url.rsplit("/", 1)[1]
        with InProcessHost(tmp_path / "data", database_url=url) as host:
            client = host.http()
            assert client.get("/readyz").json()["checks"] == {"store": "ok", "leases": "ok"}
            _allow_connections(database, False)
            try:
                down = wait_until(
                    lambda: (r := client.get("/readyz")).status_code == 503 and r, what="/readyz to turn 503"
                )
                assert down.json()["failing"] == "store" and down.json()["status"] == "unavailable"
                assert client.get("/healthz").status_code == 200, "alive: restarting the host would not help"
            finally:
                _allow_connections(database, True)
            wait_until(lambda: client.get("/readyz").status_code == 200, what="/readyz to recover", timeout=30)


def test_readyz_turns_503_first_on_sigterm_while_the_host_still_serves(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "data", "--drain-seconds", "4").start()
    try:
        with httpx.Client(base_url=host.url, timeout=10) as client:
            assert client.get("/readyz").status_code == 200
            assert host.proc is not None
            host.proc.send_signal(signal.SIGTERM)
            draining = wait_until(
                lambda: (r := client.get("/readyz")).status_code == 503 and r, what="/readyz to turn 503"
            )
            assert draining.json()["failing"] == "shutdown"
            with httpx.Client(base_url=host.url, timeout=10) as fresh:  # new connections are still served
                assert fresh.get("/.well-known/agent-card.json").status_code == 200
                assert fresh.get("/healthz").status_code == 200
        assert host.proc.wait(30) == 0
    finally:
        host.kill()
