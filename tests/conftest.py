"""Suite-wide test setup: make the helper modules beside this file importable, clean up at the end.

Test packages carry no ``__init__.py``, so ``tests/`` itself is not a package; putting it
on ``sys.path`` lets any test write ``from schemas import openwop_validator`` whatever
pytest's import mode. When collected tests use the official schemas, a hook checks once that
they can be had (``schemas_source`` finds or downloads them) and stops the session otherwise.
At collection, the tests that need no host and start nothing outside pytest are marked
``fast`` (``tiers``): ``pytest -m fast`` is the inner loop. At the end of the session the
PostgreSQL template that in-process hosts copy their databases from (``pg.migrated_database``)
is dropped. Under pytest-xdist each worker is a session of its own, with its own template,
temporary folders and databases.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

#: the host fixtures every end-to-end suite uses (``start_host``, ``backend``, ``shared_database`` …)
#: and the HTTPS receiver of pushes and webhooks (``receiver``)
pytest_plugins = ["backends", "receiver"]


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by it
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the inner-loop tier (``tiers.mark_fast``): the tests that need no host and start nothing outside pytest."""
    from tiers import mark_fast

    mark_fast(items)


def pytest_configure(config: pytest.Config) -> None:
    """Compile Tether's sources once, so every process the suite starts loads bytecode instead of compiling.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (as on CI's machine), no import writes a ``.pyc``
    for the editable install's ``src/``, and every ``tether serve``, ``tether`` command and
    SQLite writer process would compile the modules it imports again: most of a second of CPU
    per host process. ``compileall`` writes them regardless (git ignores ``__pycache__``) and
    skips the ones already up to date. Only the controller does it, before xdist starts workers.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _faults_results(config.getoption("markexpr", "") or "")
    import compileall

    import tether

    compileall.compile_dir(Path(tether.__file__).parent, quiet=1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Stop once, before any test runs, when collected tests need the official schemas and none can be had.

    Only when a collected module imported ``schemas``: ``pytest tests/store`` needs no oracle, and
    should neither download one nor fail for the lack of it. Failing here prints the one message
    (what to set, or which file's hash differed) instead of the same failure in every test.
    """
    schemas = sys.modules.get("schemas")
    unavailable = getattr(schemas, "unavailable", None)
    if unavailable is None:
        return
    problem = unavailable()
    if problem is not None:
        raise pytest.UsageError(problem)


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    """Drop the PostgreSQL template the in-process hosts' databases were copied from, if any."""
    from pg import drop_template

    drop_template()


def _faults_results(markexpr: str) -> None:
    """A folder the fault harness's tests (tests/faults, in any xdist worker) add their tallies to, when selected."""
    if "faults" not in markexpr or "not faults" in markexpr:
        return
    import tempfile

    os.environ["TETHER_FAULTS_RESULTS"] = tempfile.mkdtemp(prefix="tether-faults-")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fault harness's one line, when it ran (``faults: N failpoints × M scenarios × S stores = K crashes, …``)."""
    from faults_summary import summary

    line = summary(os.environ.get("TETHER_FAULTS_RESULTS"))
    if line:
        terminalreporter.write_line(line)
