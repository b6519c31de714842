"""The failpoint registry matches the code, both ways; a failpoint arms only as a test seam, and kills exactly there."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether import failpoints

SRC = Path(failpoints.__file__).parent


def _hits() -> dict[str, list[str]]:
    """Every ``hit("name")`` call in the package: name -> where (file:line)."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and _is_hit(node.func)):
                continue
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            assert len(node.args) == 1 and isinstance(node.args[0], ast.Constant), (
                f"{where}: a failpoint's name must be a string literal (the registry check reads it)"
            )
            found.setdefault(str(node.args[0].value), []).append(where)
    return found


def _is_hit(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "hit") or (
        isinstance(func, ast.Attribute) and func.attr == "hit" and getattr(func.value, "id", "") == "failpoints"
    )


def test_every_failpoint_in_the_code_is_registered_and_every_registered_one_is_in_the_code() -> None:
    hits = _hits()
    unregistered = {name: where for name, where in hits.items() if name not in failpoints.REGISTRY}
    assert not unregistered, f"failpoints not in tether.failpoints.REGISTRY: {unregistered}"
    unused = sorted(set(failpoints.REGISTRY) - set(hits))
    assert not unused, f"registered failpoints no code reaches: {unused}"
    assert all(failpoints.REGISTRY.values()), "every failpoint says what its window is"


@pytest.mark.parametrize(
    ("environ", "seams", "says"),
    [
        ({failpoints.ENV: "store.commit.after"}, False, "need --enable-test-seams"),
        ({failpoints.TRACE_ENV: "/tmp/x"}, False, "need --enable-test-seams"),
        ({failpoints.PLANT_ENV: "ack-before-commit"}, False, "need --enable-test-seams"),
        ({failpoints.ENV: "store.commit.later"}, True, "no failpoint 'store.commit.later'"),
        ({failpoints.ENV: "store.commit.after:0"}, True, "whole number from 1"),
        ({failpoints.PLANT_ENV: "lose-everything"}, True, "no such planted bug"),
    ],
)
def test_arming_is_refused_outside_test_seams_and_for_unknown_names(
    environ: dict[str, str], seams: bool, says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        failpoints.arm_from_environment(seams, environ)


def test_nothing_asked_arms_nothing() -> None:
    failpoints.arm_from_environment(False, {})
    failpoints.hit("store.commit.before")  # disarmed: a no-op
    assert not failpoints.planted("ack-before-commit")


def test_an_armed_failpoint_kills_the_process_its_nth_time_and_the_trace_names_each_hit(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    script = (
        "from tether import failpoints as f\n"
        f"env = {{'TETHER_FAILPOINT': 'store.commit.after:2', 'TETHER_FAILPOINT_TRACE': {str(trace)!r}}}\n"
        "f.arm_from_environment(True, env)\n"
        "f.hit('store.commit.before'); f.hit('store.commit.after'); f.hit('store.commit.before')\n"
        "print('alive', flush=True)\n"
        "f.hit('store.commit.after')\n"
        "print('survived', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 137, done.stderr
    assert done.stdout.split() == ["alive"]
    assert trace.read_text().split() == [
        "store.commit.before",
        "store.commit.after",
        "store.commit.before",
        "store.commit.after",
    ]


def test_the_host_refuses_a_failpoint_without_test_seams(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--port", "0", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, failpoints.ENV: "store.commit.after"},
    )
    assert done.returncode == 2  # refused like any other serve option that may not be given
    assert "failpoints are a test seam and need --enable-test-seams" in done.stderr
    assert not any(tmp_path.iterdir()), "a refused start writes nothing"
