"""Request/response load with wrk, the load generator that costs less CPU than any server here.

A Python client saturates its own core at about 3,000 requests/s on this machine and would
measure itself instead of the host; wrk (C, LuaJIT) drives tens of thousands per second
from one thread. ``run_wrk`` runs ``bench/wrk/rpc.lua`` and returns the JSON its ``done()``
prints, plus the derived throughput of *good* answers only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

LUA = Path(__file__).resolve().parent / "wrk" / "rpc.lua"
INSTALL_HINT = "wrk is not installed: `apt-get install -y wrk` (the Debian package) and run again"


class WrkMissing(RuntimeError):
    pass


def wrk_path() -> str:
    """The wrk executable, or WrkMissing with the command that installs it."""
    found = shutil.which("wrk")
    if found is None:
        raise WrkMissing(INSTALL_HINT)
    return found


def wrk_version() -> str:
    try:
        out = subprocess.run([wrk_path(), "--version"], capture_output=True, text=True, timeout=10)
    except WrkMissing:
        return "missing"
    text = (out.stdout or out.stderr).strip()
    return " ".join(text.split()[:2]) if text else "unknown"  # "wrk debian/4.1.0-3+b2"


def run_wrk(
    url: str,
    *,
    method: str,
    connections: int,
    duration: float,
    key: str | None,
    nonce: str,
    expect: str,
    ids_file: Path | None = None,
    threads: int = 1,
    timeout_s: int = 30,
    max_answers: int = 0,
) -> dict[str, Any]:
    """One wrk run; ``method`` is ``send`` or ``get`` (see rpc.lua).

    ``max_answers`` (the quick smoke's): each wrk thread stops loading after that many answers
    instead of at the end of ``duration``, which the run still lasts, so ``rps`` is no rate then.
    """
    threads = max(1, min(threads, connections))
    seconds = max(1, round(duration))  # wrk takes whole seconds only
    cmd = [
        wrk_path(),
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        f"--timeout={timeout_s}s",
        "-s",
        str(LUA),
        url,
        "--",
        method,
        key or "-",
        nonce,
        expect,
    ]
    cmd.append(str(ids_file) if ids_file is not None else "-")
    if max_answers:
        cmd.append(str(max_answers))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + timeout_s + 30)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("WRK_JSON ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    data: dict[str, Any] = json.loads(line.removeprefix("WRK_JSON "))
    errors = sum(v for k, v in data["errors"].items() if k != "status")  # status errors are failures already
    elapsed = data["duration_us"] / 1e6
    good = max(0, data["requests"] - data["failures"] - data["errors"]["timeout"])
    lat = data["latency_us"]
    return {
        "connections": connections,
        "threads": threads,
        "duration_s": round(elapsed, 3),
        "requests": data["requests"],
        "failed": data["failures"] + errors,
        "rps": round(good / elapsed, 1) if elapsed > 0 else 0.0,
        "p50_ms": round(lat["p50"] / 1000, 3),
        "p90_ms": round(lat["p90"] / 1000, 3),
        "p99_ms": round(lat["p99"] / 1000, 3),
        "max_ms": round(lat["max"] / 1000, 3),
        "mean_ms": round(lat["mean"] / 1000, 3),
        "socket_errors": data["errors"],
        "first_failure": data["first_failure"] or None,
    }
