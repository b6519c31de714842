"""The fault harness's tally, summed over the tests (and xdist workers) that ran it: one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def summary(folder: str | None) -> str | None:
    """``faults: N failpoints × M scenarios × S stores = K crashes, V violations`` (and what was not reached)."""
    if not folder or not Path(folder).is_dir():
        return None
    tallies: list[dict[str, Any]] = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        tallies += [json.loads(line) for line in path.read_text().splitlines() if line]
    if not tallies:
        return None
    points = {point for t in tallies for _, point in t["points"]}
    scenarios = {t["scenario"] for t in tallies}
    stores = {t["store"] for t in tallies}
    crashes = sum(t["crashes"] for t in tallies)
    violations = sum(len(t["violations"]) for t in tallies)
    lines = []
    for store in sorted(stores):
        unreached = set.intersection(*(set(t["unreached"]) for t in tallies if t["store"] == store))
        if unreached:
            lines.append(f"faults: reached by no scenario on {store}: {', '.join(sorted(unreached))}")
    line = (
        f"faults: {len(points)} failpoints × {len(scenarios)} scenarios × {len(stores)} stores = "
        f"{crashes} crashes, {violations} violations"
    )
    return "\n".join([line, *lines])
