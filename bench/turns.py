"""Two or more Tether slots taking turns at ``message/send``, for a comparison on a busy machine.

    .venv/bin/python bench/turns.py --servers tether-sqlite,tether-sqlite-thread --turns 8

Every slot is started once, on a store of its own, and warmed up; then each turn runs wrk
(``message/send``, c=32 for ``--seconds``, then c=1 for half as long) against every slot, the
order reversed every other turn, so that what the rest of the machine does falls on all of
them alike. Per run it prints good sends/s, p50/p99, the server's CPU per send (its whole
process tree) and the share of a core the rest of the machine took meanwhile (wrk
included); at the end, each slot's range and median, and each turn's ratio to the first
slot. CPU per send moves far less with a busy machine than sends/s does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import uuid
from pathlib import Path
from typing import Any

import loadgen
import servers as srv


def measure(server: srv.ServerProcess, connections: int, seconds: float) -> dict[str, Any]:
    """One wrk run of ``message/send``, with the server's CPU per good send and the others' share."""
    cpu0, busy0 = srv.proc_cpu_seconds(server.pid) or 0.0, srv.system_busy_seconds()
    result = loadgen.run_wrk(
        server.rpc_url,
        method="send",
        connections=connections,
        duration=seconds,
        key=server.key,
        nonce=uuid.uuid4().hex[:10],
        expect="completed",
    )
    cpu = (srv.proc_cpu_seconds(server.pid) or 0.0) - cpu0
    busy = srv.system_busy_seconds() - busy0
    good = result["rps"] * result["duration_s"]
    result["cpu_us_per_send"] = round(cpu / good * 1e6) if good else None
    result["others_pct"] = round((busy - cpu) / result["duration_s"] * 100)
    result["rss_mb"] = srv.proc_rss_mb(server.pid)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="tether-sqlite,tether-sqlite-thread")
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    names = args.servers.split(",")
    launcher = srv.Launcher(Path(tempfile.mkdtemp(prefix="tether-turns-")))
    running: dict[str, srv.ServerProcess] = {}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        for name in names:
            running[name] = launcher.start_tether(name, "turns")
            measure(running[name], 32, 3)  # warm-up
        for turn in range(args.turns):
            order = names if turn % 2 == 0 else names[::-1]
            for name in order:
                c32 = measure(running[name], 32, args.seconds)
                c1 = measure(running[name], 1, args.seconds / 2)
                runs[name].append({"c32": c32, "c1": c1})
                print(
                    f"turn {turn} {name}: c=32 {c32['rps']:,.0f}/s p99 {c32['p99_ms']} ms, "
                    f"{c32['cpu_us_per_send']} us CPU a send, others {c32['others_pct']} %; "
                    f"c=1 p50 {c1['p50_ms']} ms; RSS {c32['rss_mb']} MB",
                    flush=True,
                )
    finally:
        for server in running.values():
            server.stop()
        launcher.close()
    summary: dict[str, Any] = {}
    for name, turns in runs.items():
        series = {
            "c32_rps": [t["c32"]["rps"] for t in turns],
            "c32_cpu_us_per_send": [t["c32"]["cpu_us_per_send"] for t in turns],
            "c1_p50_ms": [t["c1"]["p50_ms"] for t in turns],
        }
        summary[name] = {k: {"min": min(v), "median": statistics.median(v), "max": max(v)} for k, v in series.items()}
        if name != names[0]:
            ratios = [t["c32"]["rps"] / f["c32"]["rps"] for t, f in zip(turns, runs[names[0]])]
            summary[name][f"c32_rps / {names[0]}, per turn"] = [round(r, 2) for r in ratios]
    for name, figures in summary.items():
        print(name, json.dumps(figures))


if __name__ == "__main__":
    main()
