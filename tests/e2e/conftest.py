"""Fixtures that start real host processes and clean every one of them up."""

from __future__ import annotations

import pytest

from backends import backend, shared_database, start_host  # noqa: F401 (fixtures)
from harness import HostProcess, create_key


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
