"""Instructions per request, counted by callgrind: a cost that does not move with the machine's mood.

Throughput and CPU time on a shared 2-core virtual machine swing by ±20 % between
identical runs, which hides any change smaller than that. callgrind counts the
instructions a program executes, the same for the same code and inputs whatever else the
machine is doing. This runs ``apps/inproc_load.py`` (the whole ASGI stack of a SQLite host,
in-process, no socket) under callgrind twice per scenario, at two request counts, and
reports the difference divided by the difference in requests: start-up, warm-up and
shut-down cancel out. Every thread of the process is counted (the SQLite reader and writer
too). What it leaves out: uvicorn, the kernel (sockets, fsync), and the time spent waiting.

    python bench/instructions.py --only get,get10 --tether-src /tmp/before/src

``--tether-src`` (repeatable) compares other checkouts' ``src/`` beside this one; runs go
two at a time (one per core; instruction counts do not care).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOAD = HERE / "apps" / "inproc_load.py"
SCENARIOS = ("get", "get10", "send", "send10")
#: requests in the smaller run of each pair (the larger adds --requests)
BASE = 100
_TOTAL = re.compile(r"Collected : (\d+)")


def instructions(src: Path | None, scenario: str, count: int) -> int:
    """Every instruction ``inproc_load.py SCENARIO COUNT`` executes, start to end."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={scratch}/callgrind.out",
                sys.executable,
                str(LOAD),
                scenario,
                str(count),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
    found = _TOTAL.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{scenario} x{count} ({src or 'installed'}) failed:\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def per_request(src: Path | None, scenario: str, requests: int, pool: ThreadPoolExecutor) -> float:
    small, large = pool.map(lambda count: instructions(src, scenario, count), (BASE, BASE + requests))
    return (large - small) / requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="get,send", help=f"comma-separated, from: {', '.join(SCENARIOS)}")
    parser.add_argument("--requests", type=int, default=1000, help="the difference in requests between the two runs")
    parser.add_argument("--tether-src", type=Path, action="append", default=[], help="also measure this src/ directory")
    args = parser.parse_args(argv)
    scenarios = [s for s in args.only.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed: apt-get install -y valgrind")
    builds: list[tuple[str, Path | None]] = [("this build", None)]
    builds += [(str(src), src) for src in args.tether_src]
    print("| build | " + " | ".join(f"{s}: instructions/request" for s in scenarios) + " |")
    print("|---|" + "---:|" * len(scenarios))
    with ThreadPoolExecutor(max_workers=2) as pool:
        for label, src in builds:
            cells = [f"{per_request(src, s, args.requests, pool):,.0f}" for s in scenarios]
            print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
