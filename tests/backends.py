"""The storage backends every end-to-end suite runs against, and the hosts it runs them on.

``backend`` is parametrised over SQLite (a data directory) and PostgreSQL (a database of
its own per host, or a shared one for multi-host tests), so each suite proves the same
behaviour on both. It is module-scoped: a module runs all its tests on one backend, then
all on the other, so one host can serve a whole module.

Three factories start hosts, each stopped when its scope ends:

- ``start_host``: an in-process host (``inproc.InProcessHost``) for one test;
- ``start_module_host``: in-process hosts shared by a module (``.shared(*args)``);
- ``start_process``: a real ``tether serve`` process (``harness.HostProcess``), for what
  only a process shows: SIGKILL, SIGTERM and exit codes, start-up failures, its CPU time.

``suite_host`` picks the host a suite's ``host`` fixture gives a test: the module's shared
one, unless the test is marked ``fresh_host`` (it counts what the whole host holds, or
needs the dev key's first start) or ``process`` (it needs a real process).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Generic, TypeVar

import pytest
from harness import Host, HostProcess
from inproc import InProcessHost
from pg import fresh_database, migrated_database

BACKENDS = ["sqlite", "postgres"]

H = TypeVar("H", bound=Host)
StartHost = Callable[..., InProcessHost]
StartProcess = Callable[..., HostProcess]
MakeDatabase = Callable[[], AbstractContextManager[str]]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


class Hosts(Generic[H]):
    """Hosts of one kind started in one folder on one backend; ``close`` stops every one.

    On PostgreSQL each host gets a database of its own unless ``database_url`` names one
    to share (several hosts on one database).
    """

    def __init__(self, kind: type[H], folder: Path, backend: str, database: MakeDatabase) -> None:
        self.kind = kind
        self.folder = folder
        self.backend = backend
        self._database = database
        self._databases = ExitStack()
        self._hosts: list[H] = []
        self._shared: dict[tuple[str, ...], H] = {}

    def start(self, *args: str, name: str = "host", database_url: str | None = None) -> H:
        if self.backend == "postgres" and database_url is None:
            database_url = self._databases.enter_context(self._database())
        host = self.kind(self.folder / name, *args, database_url=database_url)
        self._hosts.append(host)
        host.start()
        return host

    __call__ = start

    def shared(self, *args: str) -> H:
        """The one host of this scope started with ``args`` (started on first use)."""
        host = self._shared.get(args)
        if host is None:
            host = self._shared[args] = self.start(*args, name=f"shared-{len(self._shared)}")
        return host

    def close(self) -> None:
        try:
            for host in self._hosts:
                if isinstance(host, InProcessHost):
                    host.close()
                elif isinstance(host, HostProcess):
                    host.kill()
                    host.close_clients()
        finally:
            self._databases.close()


@pytest.fixture
def start_host(tmp_path: Path, backend: str) -> Iterator[Hosts[InProcessHost]]:
    """A factory: ``start_host(*args, name="host", database_url=None)`` returns a started in-process host."""
    hosts = Hosts(InProcessHost, tmp_path, backend, migrated_database)
    try:
        yield hosts
    finally:
        hosts.close()


@pytest.fixture(scope="module")
def start_module_host(tmp_path_factory: pytest.TempPathFactory, backend: str) -> Iterator[Hosts[InProcessHost]]:
    """In-process hosts that live as long as the module (on one backend): ``start_module_host.shared(*args)``."""
    hosts = Hosts(InProcessHost, tmp_path_factory.mktemp(f"module-{backend}"), backend, migrated_database)
    try:
        yield hosts
    finally:
        hosts.close()


@pytest.fixture
def start_process(tmp_path: Path, backend: str) -> Iterator[Hosts[HostProcess]]:
    """A factory like ``start_host`` whose hosts are real ``tether serve`` processes (first start and all)."""
    hosts = Hosts(HostProcess, tmp_path, backend, fresh_database)
    try:
        yield hosts
    finally:
        hosts.close()


def suite_host(request: pytest.FixtureRequest, *args: str) -> Host:
    """The host ``args`` describe for this test: the module's shared one unless the test is marked.

    ``@pytest.mark.fresh_host``: a host of its own (in-process). ``@pytest.mark.process``:
    a real process of its own.
    """
    if request.node.get_closest_marker("process") is not None:
        process: Hosts[HostProcess] = request.getfixturevalue("start_process")
        return process.start(*args)
    if request.node.get_closest_marker("fresh_host") is not None:
        fresh: Hosts[InProcessHost] = request.getfixturevalue("start_host")
        return fresh.start(*args)
    module: Hosts[InProcessHost] = request.getfixturevalue("start_module_host")
    return module.shared(*args)


@pytest.fixture
def shared_database(backend: str) -> Iterator[str | None]:
    """One database for several hosts (PostgreSQL only)."""
    if backend != "postgres":
        pytest.skip("several hosts share one store only on PostgreSQL")
    with fresh_database() as url:
        yield url
