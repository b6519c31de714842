"""The console's browser tests: one in-process host per module, one Chromium per module, a page per test.

The console is a client of the public API, which the other suites prove on both store
backends; here the host runs on SQLite only (``backend`` is overridden), so the browser
tests pay for one backend.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from backends import Hosts
from chromium import chromium_path, launch_args, unavailable
from inproc import InProcessHost

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

#: where the tests leave screenshots of the runs list and of a waiting run (git-ignored)
SCREENSHOTS = _HERE / "screenshots"


@pytest.fixture(scope="module")
def backend() -> str:
    return "sqlite"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    if executable is None:
        unavailable("no Chromium binary (apt-get install chromium, or set TETHER_TEST_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        unavailable(f"playwright is not installed ({exc})")
        raise
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=launch_args())
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def host(start_module_host: Hosts[InProcessHost]) -> InProcessHost:
    """The module's host (bundled workflows: approval-gated, clarification-gated …)."""
    return start_module_host.shared()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (no storage) at laptop width; fails the test on a script error or a CSP refusal."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    opened.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}") if "Content Security Policy" in message.text else None
        ),
    )
    try:
        yield opened
    finally:
        context.close()
    assert problems == [], problems
