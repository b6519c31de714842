"""The maps in the docstrings of ``tether.a2a`` and its subpackages name every module there, and only those.

So a module added, moved or renamed without a line saying what it is for fails here, and
the map of the version-neutral core is the list the import contract keeps free of the wire.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import pytest

import tether.a2a

ROOT = Path(__file__).resolve().parents[2]
CORE_CONTRACT = "The version-neutral A2A core imports no generation, no binding and no endpoint"


def mapped_modules(doc: str) -> set[str]:
    """The names before the colon of each ``- ``a``, ``b``: what they do`` line."""
    lines = [line for line in doc.splitlines() if line.startswith("- ")]
    return {name for line in lines for name in re.findall(r"``(\w+)``", line.partition(":")[0])}


def packages() -> list[str]:
    """``tether.a2a`` and every package below it."""
    found = ["tether.a2a"]
    found += [info.name for info in pkgutil.walk_packages(tether.a2a.__path__, "tether.a2a.") if info.ispkg]
    return found


@pytest.mark.parametrize("name", packages())
def test_the_package_map_names_every_module(name: str) -> None:
    package = importlib.import_module(name)
    modules = {info.name for info in pkgutil.iter_modules(package.__path__)}
    assert mapped_modules(package.__doc__ or "") == modules


def test_the_core_the_map_names_is_the_core_the_contract_keeps() -> None:
    doc = tether.a2a.__doc__ or ""
    core = doc.partition("The version-neutral core")[2].partition("\n\nThe generations")[0]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"] == CORE_CONTRACT]
    assert {f"tether.a2a.{name}" for name in mapped_modules(core)} == set(contract["source_modules"])


def test_the_map_reader_sees_a_missing_line() -> None:
    """The reader itself: names before the colon count, names after it do not."""
    doc = "Intro.\n\n- ``a``, ``b``: the first two, unlike ``c``\n- ``d``: the fourth\nnot a line of the map\n"
    assert mapped_modules(doc) == {"a", "b", "d"}
