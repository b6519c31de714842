"""Named SQL blocks: each query sits in a .sql file under a ``-- name:`` header."""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split a query file into {name: sql}; comment lines under a header are dropped."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = "\n".join(lines).strip().rstrip(";")
    return queries


def load_queries(path: Path) -> dict[str, str]:
    return parse_queries(path.read_text(encoding="utf-8"))
