"""Debian's Chromium, driven by Playwright's Python client, for the browser tests.

The tests use the system browser (``apt-get install chromium``; ``.ci/run`` installs it),
never one Playwright downloads. Where it is missing, or Playwright is not installed, the
browser tests skip and say why, except under CI (``CI=true``), where they fail: a CI run
that silently skipped the console would prove nothing about it (as ``pg.py`` does for
PostgreSQL).

``TETHER_TEST_CHROMIUM`` names another binary.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

#: where Debian's package puts the real binary (``/usr/bin/chromium`` is a shell wrapper around it)
_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")


def chromium_path() -> str | None:
    """The Chromium binary to drive, or None."""
    named = os.environ.get("TETHER_TEST_CHROMIUM")
    if named:
        return named if Path(named).is_file() else None
    for candidate in _CANDIDATES:
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium")


def unavailable(reason: str) -> None:
    """Skip the browser tests with ``reason``, or fail them under CI."""
    message = f"browser tests need Debian's chromium and the playwright package: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def launch_args() -> list[str]:
    """Chromium refuses to sandbox itself as root (as CI runs); the pages it loads are the test's own."""
    return ["--no-sandbox"] if os.geteuid() == 0 else []
