"""Hosts for the OpenWOP major-2 tests, plus the v2 wire helpers they share.

A module's tests share one in-process host per backend (``backends.suite_host``); every
request goes to the unversioned paths with ``OpenWOP-Version: 2.0``, as the v2 clients
send it, unless a test says otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from backends import suite_host
from harness import Host
from keys import made_key

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

V2 = {"OpenWOP-Version": "2.0"}


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str) -> Host:
    return suite_host(request)


@pytest.fixture
def key(host: Host) -> str:
    assert host.dev_key, "a fresh data directory prints a dev key at first start"
    return host.dev_key


@pytest.fixture
def http(host: Host, key: str) -> httpx.Client:
    client = host.http(key)
    client.headers.update(V2)
    return client


@pytest.fixture
def other_tenant_key(host: Host) -> str:
    return made_key(host, "other", "--tenant", "acme")
