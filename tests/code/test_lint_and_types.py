"""ruff (lines of at most 120 columns, pyflakes, bugbear, import order) and ``mypy --strict`` on every test run,
so a regression fails the build instead of waiting for a reviewer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_ruff_finds_nothing() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "src", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_settled() -> None:
    result = subprocess.run(
        [_tool("ruff"), "format", "--check", "--no-cache", "src", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_finds_nothing() -> None:
    result = subprocess.run([_tool("mypy"), "--strict", "src"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
