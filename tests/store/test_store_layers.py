"""The store sits low: it imports only the neutral modules, and nobody imports its internals.

Read from the source with ``ast`` (imports behind TYPE_CHECKING and inside functions
count too), so that a wrong-way import fails here rather than waiting to become a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tether
import tether.store

SOURCE = Path(tether.__file__).parent
STORE = Path(tether.store.__file__).parent
#: what the store may import from Tether: the shared kinds, the clock, ids, errors, secrets, settings
ALLOWED_BELOW = ("tether.types", "tether.clock", "tether.ids", "tether.errors", "tether.secrets", "tether.settings")


def imported_modules(path: Path) -> list[str]:
    """Every module ``path`` imports, by absolute name."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _is_private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def test_the_store_imports_nothing_above_it() -> None:
    wrong = {
        f"{path.relative_to(SOURCE)}: {module}"
        for path in STORE.rglob("*.py")
        for module in imported_modules(path)
        if module.startswith("tether.")
        and not module.startswith("tether.store")
        and not module.startswith(ALLOWED_BELOW)
    }
    assert sorted(wrong) == []


def test_nothing_outside_the_store_imports_its_private_modules() -> None:
    wrong = {
        f"{path.relative_to(SOURCE)}: {module}"
        for path in SOURCE.rglob("*.py")
        if STORE not in path.parents
        for module in imported_modules(path)
        if module.startswith("tether.store.") and _is_private(module.removeprefix("tether.store."))
    }
    assert sorted(wrong) == []


def test_one_backend_imports_nothing_of_the_other() -> None:
    for backend, other in (("sqlite", "postgres"), ("postgres", "sqlite")):
        wrong = [
            f"{path.name}: {module}"
            for path in (STORE / backend).rglob("*.py")
            for module in imported_modules(path)
            if module.startswith(f"tether.store.{other}")
        ]
        assert wrong == [], backend
