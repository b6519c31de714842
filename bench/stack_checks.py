"""The behaviours Tether's tests pin for its server stack, checked for real on each stack.

    .venv/bin/python bench/stack_checks.py                      # uvicorn and granian, side by side
    .venv/bin/python bench/stack_checks.py --servers tether-sqlite-granian --waiting 500

The tests pin these for ``tether serve`` on uvicorn; before another ASGI server could be
the default, each must hold on it too. For every server slot (``bench/servers.py``) this
starts a host on a fresh store and checks:

* **headers**: how many ``Date`` and ``Server`` headers an answer carries, its
  ``Content-Type``, and ``Allow`` on a 405;
* **SSE flushing**: ``message/stream`` request → first event and → last event (p50 of
  ``--streams``): a stack that buffered frames would show the first event only with the last;
* **idle CPU at rest** with ``--waiting`` runs waiting at approval gates (3 s to settle,
  then 10 s; the whole process tree);
* **a refused start**: a second host on the data directory the first serves must print
  Tether's one line saying why (``tether: error: ...``) and exit 3;
* **lifespan**: a SIGTERM with no stream open ends in the host's own "stopped" line (its
  shutdown ran: engine stopped, store closed) and exit status 0, and the next start on the
  same data directory takes the store's host lock and resumes every waiting run;
* **SIGTERM with open streams**: three ``tasks/resubscribe`` streams are attached, then
  SIGTERM: seconds to exit, the exit status, whether each stream's response completed, and
  whether the lifespan shutdown ran. A process still alive after ``--grace`` seconds is killed.

The results are printed as JSON (and written to ``--out`` when given).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import run as harness  # noqa: E402
import servers as srv  # noqa: E402
import streams  # noqa: E402

STOPPED = "tether: stopped; every acknowledged run is on disk"


def headers_of(server: srv.ServerProcess) -> dict[str, Any]:
    """What three answers carry: a JSON document, a JSON-RPC answer, and a 405."""
    out: dict[str, Any] = {}
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as client:
        answers = {
            "card": client.get("/.well-known/agent-card.json"),
            "rpc": client.post(
                server.slot.rpc_path, json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}
            ),
            "405": client.put("/v1/runs"),
        }
    for name, answer in answers.items():
        names = [k.lower() for k, _ in answer.headers.multi_items()]
        out[name] = {
            "status": answer.status_code,
            "date_headers": names.count("date"),
            "server_header": answer.headers.get("server"),
            "content_type": answer.headers.get("content-type"),
            "allow": answer.headers.get("allow"),
            "duplicated": sorted({n for n in names if names.count(n) > 1}),
        }
    return out


def _remaining_lines(server: srv.ServerProcess, timeout: float) -> list[str]:
    """stdout after the "serving on" line, until the process closes it (or ``timeout``)."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = server._lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            continue
        if line is None:
            break
        lines.append(line)
    return lines


def sigterm(server: srv.ServerProcess, grace: float) -> dict[str, Any]:
    """SIGTERM; seconds until the process exits (killed after ``grace``), its status, its last words."""
    assert server.proc is not None
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        status: int | str = server.proc.wait(grace)
        exited = round(time.monotonic() - t0, 3)
    except subprocess.TimeoutExpired:
        server.kill()
        status, exited = f"killed after {grace} s", None
    lines = _remaining_lines(server, 5)
    return {"exit_s": exited, "status": status, "shutdown_ran": STOPPED in lines}


def open_streams_then_sigterm(server: srv.ServerProcess, grace: float, count: int = 3) -> dict[str, Any]:
    """``count`` resubscribers on one waiting task, then SIGTERM: did their responses complete?"""
    (task_id,) = harness.create_tasks(server, 1, skill=harness.GATED)
    outcome: list[Any] = []
    attached = threading.Semaphore(0)

    def follow() -> None:
        frames = 0
        try:
            with httpx.Client(base_url=server.url, headers=server.headers(), timeout=grace + 10) as client:
                body = {"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": task_id}}
                with client.stream("POST", server.slot.rpc_path, json=body) as response:
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            frames += 1
                            if frames == 1:
                                attached.release()
            outcome.append({"frames": frames, "completed": True})
        except httpx.HTTPError as exc:
            outcome.append({"frames": frames, "completed": False, "error": f"{type(exc).__name__}: {exc}"})
            if frames == 0:
                attached.release()

    threads = [threading.Thread(target=follow, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for _ in threads:
        if not attached.acquire(timeout=30):
            raise RuntimeError(f"{server.slot.name}: a stream never got the task's first event")
    result = sigterm(server, grace)
    for thread in threads:
        thread.join(15)
    result["streams"] = outcome
    result["every_stream_completed"] = len(outcome) == count and all(o["completed"] for o in outcome)
    return result


def refused_start(launcher: srv.Launcher, name: str, tag: str) -> dict[str, Any]:
    """A second host of slot ``name`` on the data directory of the one serving as ``tag``."""
    second = launcher.tether(name, tag)
    done = subprocess.run(
        second.cmd, env={**os.environ, **second.env}, capture_output=True, text=True, timeout=60, cwd=BENCH.parent
    )
    said = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    return {
        "status": done.returncode,
        "says_why": any(ln.startswith("tether: error: another Tether host is serving") for ln in said),
        "output": said[-3:],
    }


def check(launcher: srv.Launcher, name: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"label": srv.SERVERS[name].label}
    server = launcher.start_tether(name, "checks")
    try:
        out["headers"] = headers_of(server)
        out["refused_start"] = refused_start(launcher, name, "checks")
        target = streams.Target(server.rpc_url, server.headers())
        sse = streams.run(streams.stream_latency(target, args.streams, max(2, args.streams // 10)))
        out["sse"] = {k: sse[k] for k in ("streams", "failed", "first_event_ms", "complete_ms")}
        runs, stragglers = harness.fill_waiting_runs(server, args.waiting, 30)
        time.sleep(3)
        out["rest"] = {
            "waiting_runs": len(runs) - stragglers,
            "cpu_pct": srv.cpu_percent(server.pid, 10),
            "processes": len(srv.process_tree(server.pid)),
            "rss_mb": srv.proc_rss_mb(server.pid),
        }
        out["sigterm_idle"] = sigterm(server, args.grace)
        t0 = server.spawn()
        server.wait_announced(t0, 60)
        server.wait_answering(t0, 60)
        resumed = server.announcement.split("resumed ", 1)[-1].split(" ", 1)[0]
        out["restart"] = {"resumed": int(resumed) if resumed.isdigit() else None, "waiting": len(runs)}
        out["sigterm_streams"] = open_streams_then_sigterm(server, args.grace)
    finally:
        server.kill()
    out["log_tail"] = server.log_path.read_text(errors="replace").splitlines()[-8:] if server.log_path.exists() else []
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/stack_checks.py", description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="tether-sqlite,tether-sqlite-granian")
    parser.add_argument("--streams", type=int, default=50, help="message/stream requests for the SSE check")
    parser.add_argument("--waiting", type=int, default=200, help="runs waiting at a gate during the idle check")
    parser.add_argument("--grace", type=float, default=20.0, help="seconds a SIGTERM'd host has before SIGKILL")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="tether-stack-checks-"))
    launcher = srv.Launcher(workdir)
    results: dict[str, Any] = {"workdir": str(workdir)}
    try:
        for name in args.servers.split(","):
            harness.log(f"checks: {name}")
            results[name] = check(launcher, name, args)
    finally:
        launcher.close()
    results["others_cpu_pct_after"] = harness._background_load()
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
