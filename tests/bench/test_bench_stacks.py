"""The harness's second server stack: what it counts of a server, how it stops one, how it pairs the stacks.

granian serves from a worker process it forks, so the harness counts a server's whole
process tree and kills its whole process group; the report pairs each ``X`` with
``X-granian`` measured in the same run. Serving on granian for real is not tested here:
granian is in the ``bench`` extra, which the test run does not install, and a test that
skips there would count for nothing; ``bench/stack_checks.py`` exercises it where it is.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


servers = _load("servers")
report = _load("report")
ServerProcess = servers.ServerProcess

#: a parent that only waits, and a child of it that burns CPU, says so, then waits too
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
child.wait()
"""
CHILD = """
import time
while time.process_time() < 0.3:
    pass
print("burnt", flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _until_closed(server: ServerProcess) -> None:
    """Read the server's stdout to its end (the harness closes it there), at most 10 s."""
    deadline = time.monotonic() + 10
    while server._lines.get(timeout=max(0.01, deadline - time.monotonic())) is not None:
        pass


def test_a_servers_cpu_and_rss_cover_its_children_and_kill_takes_them_all() -> None:
    slot = servers.SERVERS["bare-granian"]
    with tempfile.TemporaryDirectory() as logs:
        server = servers.ServerProcess(slot, [sys.executable, "-c", PARENT, CHILD], Path(logs) / "tree.log")
        server.spawn()
        try:
            deadline = time.monotonic() + 30
            line = server._lines.get(timeout=30)
            assert line == "burnt"
            tree = servers.process_tree(server.pid)
            while len(tree) < 2 and time.monotonic() < deadline:
                tree = servers.process_tree(server.pid)
            assert len(tree) == 2, tree
            child = tree[1]
            own = servers._cpu_seconds(server.pid)
            assert own is not None and own < 0.3  # the parent only waited
            total = servers.proc_cpu_seconds(server.pid)
            assert total is not None and total - own >= 0.27  # the child burnt 0.3 s; utime, stime each lose <1 tick
            own_rss = servers._rss_mb(server.pid) or 0
            assert servers.proc_rss_mb(server.pid) > own_rss
            with servers.RssSampler(server.pid, 0.01) as sampler:
                pass
            assert sampler.peak > own_rss
        finally:
            server.kill()
            _until_closed(server)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _alive(child), "the child outlived its process group's SIGKILL"


def _wrk(rps: float, cpu_pct: float) -> dict[str, float]:
    return {"requests": rps, "rps": rps, "server_cpu_pct": cpu_pct}


def test_the_report_pairs_each_server_with_its_granian_twin_only() -> None:
    result = {
        "scenarios": {
            "send": {
                "tether-sqlite": {"c32": _wrk(1000.0, 50.0)},
                "tether-sqlite-granian": {"c32": _wrk(1250.0, 50.0)},
                "sdk-memory": {"c32": _wrk(500.0, 50.0)},
            },
            "resubscribe": {
                "tether-sqlite": {"fanout_1000": {"delivery_ms": {"p50": 100.0, "p99": 200.0}}},
                "tether-sqlite-granian": {"fanout_1000": {"delivery_ms": {"p50": 50.0, "p99": 300.0}}},
            },
        }
    }
    rows = {(r["server"], r["what"]): r for r in report.stack_ratios(result)}
    assert set(rows) == {
        ("tether-sqlite", "message/send, c=32"),
        ("tether-sqlite", "fan-out 1,000, delivery p50 (ms, lower is better)"),
        ("tether-sqlite", "fan-out 1,000, delivery p99 (ms, lower is better)"),
    }
    send = rows["tether-sqlite", "message/send, c=32"]
    assert send["ratio"] == 1.25
    assert (send["uvicorn_cpu_us"], send["granian_cpu_us"], send["cpu_ratio"]) == (500.0, 400.0, 0.8)
    assert rows["tether-sqlite", "fan-out 1,000, delivery p99 (ms, lower is better)"]["ratio"] == 1.5
    assert "## uvicorn beside granian" in report.markdown({**result, "uvicorn_vs_granian": list(rows.values())})


def test_the_harness_refuses_an_unknown_server_naming_every_slot() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--servers", "nginx"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "tether-sqlite-granian" in done.stderr and "bare-granian" in done.stderr
