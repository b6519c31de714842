"""Hosts for the end-to-end tests, every one of them stopped (or killed) at the end of its scope.

A module's tests share one in-process host per backend; a test marked ``fresh_host``
gets one of its own, and one marked ``process`` a real ``tether serve`` (see
``backends.suite_host``).
"""

from __future__ import annotations

import pytest
from backends import suite_host
from harness import Host
from keys import made_key


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str) -> Host:
    return suite_host(request)


@pytest.fixture
def key(host: Host) -> str:
    assert host.dev_key, "a fresh data directory prints a dev key at first start"
    return host.dev_key


@pytest.fixture
def other_tenant_key(host: Host) -> str:
    return made_key(host, "other", "--tenant", "acme")
