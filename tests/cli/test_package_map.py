"""The map in ``tether.cli``'s docstring names every module of the package, and only those.

So a module added (or renamed) without a line saying what it is for fails here.
"""

from __future__ import annotations

import pkgutil
import re

import tether.cli


def mapped_modules(doc: str) -> set[str]:
    """The names before the colon of each ``- ``a``, ``b``: what they do`` line."""
    lines = [line for line in doc.splitlines() if line.startswith("- ")]
    return {name for line in lines for name in re.findall(r"``(\w+)``", line.partition(":")[0])}


def test_the_package_map_names_every_module() -> None:
    modules = {info.name for info in pkgutil.iter_modules(tether.cli.__path__)}
    assert mapped_modules(tether.cli.__doc__ or "") == modules
