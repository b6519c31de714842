"""Several real hosts on one PostgreSQL database (the only store hosts can share)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_A2A = Path(__file__).resolve().parents[1] / "a2a"
if str(_A2A) not in sys.path:
    sys.path.insert(0, str(_A2A))


@pytest.fixture
def backend() -> str:
    """Only PostgreSQL: SQLite is one host's store by design."""
    return "postgres"
