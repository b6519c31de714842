"""Suite-wide test setup: make the helper modules beside this file importable, clean up at the end.

Test packages carry no ``__init__.py``, so ``tests/`` itself is not a package; putting it
on ``sys.path`` lets any test write ``from schemas import openwop_validator`` whatever
pytest's import mode. At the end of the session the PostgreSQL template that in-process
hosts copy their databases from (``pg.migrated_database``) is dropped.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    """Drop the PostgreSQL template the in-process hosts' databases were copied from, if any."""
    from pg import drop_template

    drop_template()
