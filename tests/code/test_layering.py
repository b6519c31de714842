"""The layering is a contract, checked on every test run.

``[tool.importlinter]`` in ``pyproject.toml`` states the layers (dependencies point
inward; the A2A and REST surfaces never import each other; nothing imports the CLI; the
engine speaks no HTTP and no SQL; the two A2A generations know nothing of each other, and
the version-neutral A2A core nothing of them or of the wire) and import-linter checks them
against the real import graph. One rule import-linter has no contract for is checked here: no module imports
another package's ``_private`` module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src"


def test_the_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def _imported(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """Every module ``tree`` (the source of ``module``) imports, absolute, with its line."""
    found: list[tuple[int, str]] = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def private_imports(source_root: Path) -> list[str]:
    """``importer:line -> module`` for each import of a ``_private`` module from outside its package."""
    problems: dict[str, None] = {}  # ordered, each once
    for path in sorted(source_root.rglob("*.py")):
        relative = path.relative_to(source_root).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)
        importer_package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for line, imported in _imported(ast.parse(path.read_text(), str(path)), module):
            names = imported.split(".")
            for depth, name in enumerate(names):
                if name.startswith("_") and not name.startswith("__"):
                    owner = ".".join(names[:depth])
                    if importer_package != owner and not importer_package.startswith(owner + "."):
                        problems[f"{module}:{line} -> {'.'.join(names[: depth + 1])}"] = None
                    break
    return list(problems)


def test_no_module_imports_another_packages_private_module() -> None:
    assert private_imports(SOURCE) == []


def test_the_private_module_rule_sees_a_violation(tmp_path: Path) -> None:
    """The checker itself: a sibling's private module is refused, one's own package's is not."""
    (tmp_path / "pkg" / "store").mkdir(parents=True)
    (tmp_path / "pkg" / "egress").mkdir()
    for folder in ("pkg", "pkg/store", "pkg/egress"):
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg" / "store" / "_fanout.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "store" / "base.py").write_text("from pkg.store._fanout import X\nfrom . import _fanout\n")
    (tmp_path / "pkg" / "egress" / "outbox.py").write_text(
        "from pkg.store._fanout import X\nfrom ..store import _fanout\n"
    )
    assert private_imports(tmp_path) == [
        "pkg.egress.outbox:1 -> pkg.store._fanout",
        "pkg.egress.outbox:2 -> pkg.store._fanout",
    ]
