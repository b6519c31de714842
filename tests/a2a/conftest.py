"""Hosts for the A2A tests (the test workflows loaded, the conformance seams mounted), plus A2A helpers.

A module's tests share one in-process host per backend; a test marked ``fresh_host``
gets one of its own, and one marked ``process`` a real ``tether serve`` (see
``backends.suite_host``). ``a2a_wire`` beside this file is put on ``sys.path`` the way
the suite's root conftest does for ``tests/``, so every A2A test can import the checked
wire helpers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from harness import Host

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from a2a_wire import WORKFLOWS  # noqa: E402
from backends import suite_host  # noqa: E402
from keys import made_key  # noqa: E402


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str) -> Host:
    """A host with the test workflows loaded and the conformance seams mounted."""
    return suite_host(request, "--workflows", str(WORKFLOWS), "--enable-test-seams")


@pytest.fixture
def key(host: Host) -> str:
    assert host.dev_key, "a fresh data directory prints a dev key at first start"
    return host.dev_key


@pytest.fixture
def http(host: Host, key: str) -> httpx.Client:
    return host.http(key)


@pytest.fixture
def other_tenant_key(host: Host) -> str:
    return made_key(host, "other", "--tenant", "acme")
