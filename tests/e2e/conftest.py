"""Fixtures that start real host processes and clean every one of them up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import HostProcess, create_key


@pytest.fixture
def start_host(tmp_path: Path) -> Iterator[object]:
    """A factory: ``start_host(*args, name="a")`` returns a started HostProcess."""
    hosts: list[HostProcess] = []

    def start(*args: str, name: str = "host") -> HostProcess:
        host = HostProcess(tmp_path / name, *args).start()
        hosts.append(host)
        return host

    yield start
    for host in hosts:
        host.kill()
        host.close_clients()


@pytest.fixture
def host(start_host) -> HostProcess:  # type: ignore[no-untyped-def]
    return start_host()


@pytest.fixture
def key(host: HostProcess) -> str:
    assert host.dev_key, "a fresh data directory prints a dev key at first start"
    return host.dev_key


@pytest.fixture
def other_tenant_key(host: HostProcess) -> str:
    return create_key(host.data_dir, "other", "--tenant", "acme")
