"""No module of Tether is over 600 lines: past that, a module holds more than one job.

A module that grows past the limit is split by what it does, not trimmed to pass: the
limit is the point where a newcomer can no longer read the module in one sitting.
"""

from __future__ import annotations

from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "tether"
LIMIT = 600


def test_no_module_is_over_600_lines() -> None:
    sizes = {path.relative_to(SOURCE).as_posix(): len(path.read_text().splitlines()) for path in SOURCE.rglob("*.py")}
    assert len(sizes) > 100, "the source tree was found"
    over = {module: lines for module, lines in sizes.items() if lines > LIMIT}
    assert not over, f"over {LIMIT} lines, split by job: {over}"
