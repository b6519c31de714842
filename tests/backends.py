"""The storage backends every end-to-end suite runs against, as one pytest fixture.

``start_host`` is parametrised over SQLite (a data directory) and PostgreSQL (a fresh
database per host, or a shared one for multi-host tests), so each suite proves the
same behaviour on both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from harness import HostProcess
from pg import fresh_database

BACKENDS = ["sqlite", "postgres"]

StartHost = Callable[..., HostProcess]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def start_host(tmp_path: Path, backend: str) -> Iterator[StartHost]:
    """A factory: ``start_host(*args, name="a", database_url=None)`` returns a started host.

    On PostgreSQL each host gets a fresh database unless ``database_url`` names one to
    share (several hosts on one database).
    """
    hosts: list[HostProcess] = []
    with ExitStack() as databases:

        def start(*args: str, name: str = "host", database_url: str | None = None) -> HostProcess:
            if backend == "postgres" and database_url is None:
                database_url = databases.enter_context(fresh_database())
            host = HostProcess(tmp_path / name, *args, database_url=database_url).start()
            hosts.append(host)
            return host

        try:
            yield start
        finally:
            for host in hosts:
                host.kill()
                host.close_clients()


@pytest.fixture
def shared_database(backend: str) -> Iterator[str | None]:
    """One database for several hosts (PostgreSQL only)."""
    if backend != "postgres":
        pytest.skip("several hosts share one store only on PostgreSQL")
    with fresh_database() as url:
        yield url
