"""docs/caches.md names every in-memory copy of durable state, and no copy goes unnamed.

A class declares the attributes that hold copies with ``tether.caches.holds_copies``; the
page has a section for each (``### `Class.attribute` ``) that names the tests proving the
copy is never staler than it says. A sweep of the source flags what looks like a cache (an
``OrderedDict`` or ``deque`` kept on an instance, an attribute or module-level container
named for a cache, a memoised function): each must be declared, or listed in the page's table of things that look like
caches but copy nothing durable. So a new cache without a row fails here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "tether"
TESTS = ROOT / "tests"
PAGE = ROOT / "docs" / "caches.md"

#: containers whose instances keep what they are given: kept on an instance, they may be a copy
_CONTAINERS = {"OrderedDict", "deque", "TaskCache", "Claims"}
#: attribute names that say "cache"
_NAMED = re.compile(r"cache|kept|recent|ring|memo", re.IGNORECASE)
#: decorators that memoise
_MEMOISING = {"lru_cache", "cache", "cached_property"}

_SECTION = re.compile(r"^### `(\w+\.\w+)`", re.MULTILINE)
_NOT_COPY_ROW = re.compile(r"^\| `(\w+\.\w+)` \|", re.MULTILINE)
_PROOF = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


@dataclass(frozen=True)
class Sweep:
    """What the source declares (``Class.attribute``) and what looks like a cache, each with where it is."""

    declared: dict[str, str]
    suspects: dict[str, str]
    undeclared_attributes: list[str]


def _name(node: ast.expr) -> str:
    """The last name of a call's or decorator's target (``functools.lru_cache(...)`` -> ``lru_cache``)."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _instance_attributes(cls: ast.ClassDef) -> dict[str, tuple[ast.expr | None, ast.expr | None]]:
    """Each ``self.<name>`` a method of ``cls`` assigns: (value, annotation) of its first assignment."""
    found: dict[str, tuple[ast.expr | None, ast.expr | None]] = {}
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        annotation: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value, annotation = [node.target], node.value, node.annotation
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                found.setdefault(target.attr, (value, annotation))
    return found


def _a_container(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Dict | ast.Set | ast.List) or (
        isinstance(value, ast.Call) and _name(value) in {"dict", "set", "list", *_CONTAINERS}
    )


def _looks_like_a_cache(name: str, value: ast.expr | None, annotation: ast.expr | None) -> bool:
    if _NAMED.search(name):
        return True
    if isinstance(value, ast.Call) and _name(value) in _CONTAINERS:
        return True
    return annotation is not None and any(c in ast.unparse(annotation) for c in ("OrderedDict", "deque"))


def sweep_module(tree: ast.Module, where: str, into: Sweep) -> None:
    """Add what ``tree`` (the module at ``where``) declares and what in it looks like a cache."""
    module = Path(where).stem
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(_name(d) in _MEMOISING for d in node.decorator_list):
                into.suspects[f"{module}.{node.name}"] = where
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _a_container(node.value):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and _looks_like_a_cache(target.id, node.value, None):
                    into.suspects[f"{module}.{target.id}"] = where  # a module-level container kept across calls
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        attributes = _instance_attributes(cls)
        for decorator in cls.decorator_list:
            if isinstance(decorator, ast.Call) and _name(decorator) == "holds_copies":
                for argument in decorator.args:
                    assert isinstance(argument, ast.Constant) and isinstance(argument.value, str), where
                    into.declared[f"{cls.name}.{argument.value}"] = where
                    if argument.value not in attributes:
                        into.undeclared_attributes.append(f"{where}: {cls.name} assigns no self.{argument.value}")
        for name, (value, annotation) in attributes.items():
            if _looks_like_a_cache(name, value, annotation):
                into.suspects[f"{cls.name}.{name}"] = where
        for method in cls.body:
            if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                if any(_name(d) in _MEMOISING for d in method.decorator_list):
                    into.suspects[f"{cls.name}.{method.name}"] = where


def sweep(source: Path) -> Sweep:
    found = Sweep({}, {}, [])
    for path in sorted(source.rglob("*.py")):
        sweep_module(ast.parse(path.read_text(), str(path)), str(path.relative_to(ROOT)), found)
    return found


def _sections(page: str) -> dict[str, str]:
    """Each ``### `Class.attribute` `` section of the page, by its name, with its text."""
    heads = list(_SECTION.finditer(page))
    return {
        head.group(1): page[head.end() : heads[i + 1].start() if i + 1 < len(heads) else len(page)]
        for i, head in enumerate(heads)
    }


def test_every_declared_copy_has_a_section_and_every_section_a_declared_copy() -> None:
    found = sweep(SOURCE)
    sections = _sections(PAGE.read_text())
    assert not found.undeclared_attributes
    missing = sorted(f"{name} ({where})" for name, where in found.declared.items() if name not in sections)
    assert not missing, f"declared with holds_copies but not described in docs/caches.md: {missing}"
    orphans = sorted(set(sections) - set(found.declared))
    assert not orphans, f"docs/caches.md describes copies no class declares: {orphans}"


def test_each_section_names_the_tests_that_prove_it_and_they_exist() -> None:
    for name, text in _sections(PAGE.read_text()).items():
        for field in ("Holds", "Filled by", "Invalidated by", "Across hosts", "Proved by"):
            assert f"**{field}**" in text, f"{name}: no **{field}** line"
        proofs = _PROOF.findall(text)
        assert proofs, f"{name}: names no test as tests/<file>.py::test_<name>"
        for file, test in proofs:
            path = ROOT / file
            assert path.is_file(), f"{name}: no {file}"
            assert re.search(rf"^(async )?def {test}\(", path.read_text(), re.MULTILINE), f"{name}: no {test} in {file}"


def test_everything_that_looks_like_a_cache_is_declared_or_listed_as_no_copy() -> None:
    found = sweep(SOURCE)
    not_copies = set(_NOT_COPY_ROW.findall(PAGE.read_text()))
    explained = set(found.declared) | not_copies
    unexplained = sorted(f"{name} ({where})" for name, where in found.suspects.items() if name not in explained)
    assert not unexplained, (
        "these look like caches: declare each copy of durable state with tether.caches.holds_copies and describe "
        f"it in docs/caches.md, or list it there as no copy, saying why: {unexplained}"
    )
    stale = sorted(not_copies - set(found.suspects))
    assert not stale, f"docs/caches.md lists as no copy what the source no longer has: {stale}"


def test_the_sweep_flags_a_new_cache_and_reads_a_declaration() -> None:
    source = (
        "from collections import OrderedDict\n"
        "import functools\n"
        "@holds_copies('_rows')\n"
        "class Declared:\n"
        "    def __init__(self) -> None:\n"
        "        self._rows = {}\n"
        "        self._recent = OrderedDict()\n"
        "class Unnoticed:\n"
        "    def __init__(self) -> None:\n"
        "        self.tasks: OrderedDict[str, int] = OrderedDict()\n"
        "_PARSED_CACHE: dict[str, str] = {}\n"
        "_LIMIT_CACHE = 8\n"
        "@functools.lru_cache(maxsize=8)\n"
        "def parse(text: str) -> str:\n"
        "    return text\n"
    )
    found = Sweep({}, {}, [])
    sweep_module(ast.parse(source), "src/tether/example.py", found)
    assert set(found.declared) == {"Declared._rows"}
    assert set(found.suspects) == {"Declared._recent", "Unnoticed.tasks", "example.parse", "example._PARSED_CACHE"}
