"""Every CLI test runs with a clean environment: a developer's shell must not point it at a real store or host."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TETHER_DATA_DIR", "TETHER_DATABASE_URL", "TETHER_URL", "TETHER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
