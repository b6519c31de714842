"""Real host processes for the A2A tests (fixtures copied from tests/e2e, plus A2A helpers).

``a2a_wire`` beside this file is put on ``sys.path`` the way the suite's root conftest
does for ``tests/``, so every A2A test can import the checked wire helpers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from harness import HostProcess, create_key

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from a2a_wire import WORKFLOWS  # noqa: E402
from backends import StartHost, backend, shared_database, start_host  # noqa: E402,F401 (fixtures)


@pytest.fixture
def host(start_host: StartHost) -> HostProcess:
    """A host with the test workflows loaded and the conformance seams mounted."""
    return start_host("--workflows", str(WORKFLOWS), "--enable-test-seams")


@pytest.fixture
def key(host: HostProcess) -> str:
    assert host.dev_key, "a fresh data directory prints a dev key at first start"
    return host.dev_key


@pytest.fixture
def http(host: HostProcess, key: str) -> httpx.Client:
    return host.http(key)


@pytest.fixture
def other_tenant_key(host: HostProcess) -> str:
    return create_key(host.data_dir, "other", "--tenant", "acme")
