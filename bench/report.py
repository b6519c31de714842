"""The report: issues 6's and 12's targets judged from one run's JSON, and the markdown tables.

``targets(result)`` turns the measurements into PASS/FAIL lines, each a ratio or a bound
measured in the same run; a target whose inputs were not measured (a server skipped, a
scenario not selected) is ``pass: None`` and shows as "not measured". ``markdown(result)``
renders everything; ``top_functions(raw)`` summarises a py-spy raw (collapsed) profile.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

TETHER = "tether-sqlite"
TETHER_POSTGRES = "tether-postgres"
#: a measurement during which other processes took more than this share of a core is flagged
BUSY_PCT = 15.0
SDK_MEMORY = "sdk-memory"
SDK_SQLITE = "sdk-sqlite"
BARE = "bare"


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def _rps(result: dict[str, Any], scenario: str, server: str, c: int) -> float | None:
    run = _get(result, "scenarios", scenario, server, f"c{c}")
    if not run or not run.get("requests"):
        return None
    return float(run["rps"])


def _target(
    tid: str, what: str, value: float | None, threshold: float, *, op: str, unit: str, detail: str = ""
) -> dict[str, Any]:
    passed = None if value is None else {">=": value >= threshold, "<=": value <= threshold}.get(op, value < threshold)
    return {
        "id": tid,
        "what": what,
        "value": value,
        "op": op,
        "threshold": threshold,
        "unit": unit,
        "pass": passed,
        "detail": detail,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return round(a / b, 3)


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 6's targets, each judged on numbers from this one run."""
    out = []
    send_t, send_m, send_s = (_rps(result, "send", s, 32) for s in (TETHER, SDK_MEMORY, SDK_SQLITE))
    rates = f"Tether {send_t} req/s, SDK in-memory {send_m} req/s, SDK DatabaseTaskStore {send_s} req/s"
    out.append(
        _target(
            "send-vs-sdk-memory",
            "message/send c=32: Tether on SQLite ≥ 3× SDK (InMemoryTaskStore)",
            _ratio(send_t, send_m),
            3,
            op=">=",
            unit="×",
            detail=rates,
        )
    )
    out.append(
        _target(
            "send-vs-sdk-sqlite",
            # issue 6 asked 25× against a Python load generator; issue 12 restated it as 10× under wrk
            "message/send c=32: Tether on SQLite ≥ 10× SDK (DatabaseTaskStore, SQLite)",
            _ratio(send_t, send_s),
            10,
            op=">=",
            unit="×",
            detail=rates,
        )
    )
    p99 = _get(result, "scenarios", "send", TETHER, "c32", "p99_ms")
    out.append(_target("send-p99", "message/send c=32: Tether on SQLite p99 < 100 ms", p99, 100, op="<", unit="ms"))
    get_t, get_m, get_b = (_rps(result, "get", s, 32) for s in (TETHER, SDK_MEMORY, BARE))
    rates = f"Tether {get_t} req/s, SDK in-memory {get_m} req/s, bare ASGI {get_b} req/s"
    out.append(
        _target(
            "get-vs-sdk-memory",
            "tasks/get c=32: Tether on SQLite ≥ 2× SDK (InMemoryTaskStore)",
            _ratio(get_t, get_m),
            2,
            op=">=",
            unit="×",
            detail=rates,
        )
    )
    out.append(
        _target(
            "get-vs-bare",
            "tasks/get c=32: Tether on SQLite ≥ 50 % of the bare ASGI ceiling",
            _ratio(get_t, get_b),
            0.5,
            op=">=",
            unit="×",
            detail=rates,
        )
    )
    out += postgres_targets(result)
    first = _get(result, "scenarios", "stream", TETHER, "first_event_ms", "p50")
    out.append(_target("stream-first-event", "message/stream: first event p50 < 10 ms", first, 10, op="<", unit="ms"))
    fanouts = _get(result, "scenarios", "resubscribe", TETHER) or {}
    sizes = sorted(int(k.split("_")[1]) for k in fanouts if k.startswith("fanout_"))
    big = fanouts.get(f"fanout_{sizes[-1]}") if sizes else None
    label = f"{sizes[-1]:,}" if sizes else "1,000"
    if big is not None:
        rounds = big.get("rounds", 1)
        every = big.get("every_stream", big["delivered"] == big["streams"] * rounds)
        p99v = big["delivery_ms"].get("p99")
        detail = (
            f"{big['delivered']:,}/{big['streams'] * rounds:,} deliveries over {rounds} round(s), p99 per round "
            f"{big.get('round_p99_ms')}" + ("" if every else "; a stream missed the event: FAIL")
        )
        fan = _target(
            "fanout-p99",
            f"{label} resubscribers: every stream gets the next event, p99 < 250 ms",
            p99v,
            250,
            op="<",
            unit="ms",
            detail=detail,
        )
        if not every:
            fan["pass"] = False
        out.append(fan)
        out.append(
            _target(
                "fanout-rss",
                f"{label} resubscribers: host RSS < 250 MB",
                big.get("rss_peak_mb"),
                250,
                op="<",
                unit="MB",
            )
        )
    else:
        out.append(
            _target(
                "fanout-p99",
                "1,000 resubscribers: every stream gets the next event, p99 < 250 ms",
                None,
                250,
                op="<",
                unit="ms",
            )
        )
        out.append(_target("fanout-rss", "1,000 resubscribers: host RSS < 250 MB", None, 250, op="<", unit="MB"))
    restarts = _get(result, "scenarios", "restart", TETHER, "runs") or []
    last = restarts[-1] if restarts else None
    n = f"{last['waiting_runs']:,}" if last else "10,000"
    out.append(
        _target(
            "restart-serving",
            f"restart with {n} non-terminal runs: serving in < 3 s",
            last and last["serving_s"],
            3,
            op="<",
            unit="s",
        )
    )
    rest = _get(result, "scenarios", "rest", TETHER)
    n = f"{rest['waiting_runs']:,}" if rest and "waiting_runs" in rest else "10,000"
    out.append(
        _target(
            "rest-cpu", f"at rest with {n} waiting runs: CPU < 1 %", rest and rest.get("cpu_pct"), 1, op="<", unit="%"
        )
    )
    out += outbox_targets(result)
    out += crash_targets(result)
    for r in major_ratios(result):
        if r["server"] == TETHER:
            out.append(
                _target(
                    f"openwop-v2-{'get' if r['operation'].startswith('GET') else 'create'}",
                    f"OpenWOP {r['operation']} at v2 within 10 % of v1 (Tether on SQLite, c=32)",
                    r["ratio"],
                    WITHIN,
                    op=">=",
                    unit="×",
                    detail=f"v1 {r['v1_rps']} req/s, v2 {r['v2_rps']} req/s, median of {r['turns']} turns each",
                )
            )
    return out


def postgres_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 12's PostgreSQL targets: each a share of Tether on SQLite's throughput in the same run."""
    out = []
    for scenario, label, share in (("send", "message/send", 0.7), ("get", "tasks/get", 0.5)):
        postgres, sqlite = (_rps(result, scenario, s, 32) for s in (TETHER_POSTGRES, TETHER))
        out.append(
            _target(
                f"{scenario}-postgres-vs-sqlite",
                f"{label} c=32: Tether on PostgreSQL ≥ {share:.0%} of Tether on SQLite",
                _ratio(postgres, sqlite),
                share,
                op=">=",
                unit="×",
                detail=f"PostgreSQL {postgres} req/s, SQLite {sqlite} req/s",
            )
        )
    return out


def outbox_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 12's outbox targets, for Tether on SQLite (PostgreSQL's legs are reported beside them)."""
    box = _get(result, "scenarios", "outbox", TETHER) or {}
    burst = box.get("burst_webhook_1") or {}
    sustained = box.get("sustained") or {}
    backlog = box.get("backlog") or {}
    out = [
        _target(
            "outbox-one-receiver",
            "outbox: webhooks to one loopback TLS receiver ≥ 1,000 deliveries/s",
            burst.get("deliveries_per_s"),
            1000,
            op=">=",
            unit="/s",
            detail=f"{burst.get('delivered', 0):,} deliveries" if burst else "",
        ),
        _target(
            "outbox-sustained-p99",
            f"outbox: {sustained.get('offered_rate', 500)} deliveries/s offered for "
            f"{sustained.get('offered_s', 60):.0f} s, commit → receipt p99 < 100 ms",
            _get(sustained, "latency_ms", "p99"),
            100,
            op="<",
            unit="ms",
        ),
        _target(
            "outbox-backlog-drain",
            f"outbox: a backlog of {backlog.get('expected', 50000):,} drains at ≥ 1,000/s",
            backlog.get("receipt_rate_per_s"),
            1000,
            op=">=",
            unit="/s",
        ),
    ]
    rounds = _get(result, "scenarios", "outbox", TETHER, "compare", "rounds") or []
    then = [r["deliveries_per_s"] for r in rounds if r.get("build") == "compared build" and r.get("deliveries_per_s")]
    now = [r["deliveries_per_s"] for r in rounds if r.get("build") == "this build" and r.get("deliveries_per_s")]
    ratio = _ratio(sum(now) / len(now), sum(then) / len(then)) if then and now else None
    out.append(
        _target(
            "outbox-vs-compared",
            "outbox: webhooks to one receiver ≥ 20× the compared build (--outbox-compare)",
            ratio,
            20,
            op=">=",
            unit="×",
            detail=f"this build {now}/s, compared build {then}/s, taking turns" if ratio else "",
        )
    )
    for t in out:  # a leg that lost deliveries fails whatever its speed
        leg = {"outbox-one-receiver": burst, "outbox-sustained-p99": sustained, "outbox-backlog-drain": backlog}.get(
            t["id"]
        )
        if leg and leg.get("complete") is False:
            t["pass"] = False
            t["detail"] += f"; only {leg.get('delivered'):,} of {leg.get('expected'):,} delivered"
    return out


#: issue 24: a SIGKILL under load re-sends at most this many deliveries on average, with this many in flight
CRASH_RESENT, CRASH_IN_FLIGHT = 2, 2


def crash_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 24's crash target, for Tether on SQLite: re-sent per kill with few deliveries in flight."""
    legs = _get(result, "scenarios", "crash", TETHER) or {}
    leg = legs.get(f"concurrency_{CRASH_IN_FLIGHT}") or {}
    default = legs.get("concurrency_16") or {}
    detail = f"{leg.get('kills')} kills" if leg else ""
    if default:
        detail += f"; at the default 16 in flight: {default.get('per_kill')} per kill"
    target = _target(
        "crash-resent-per-kill",
        f"crash: SIGKILL under load with --delivery-concurrency {CRASH_IN_FLIGHT}, re-sent per kill ≤ {CRASH_RESENT}",
        leg.get("per_kill"),
        CRASH_RESENT,
        op="<=",
        unit="",
        detail=detail,
    )
    if leg and leg.get("complete") is False:  # a delivery lost fails it whatever the count
        target["pass"] = False
        target["detail"] += "; not every delivery arrived"
    return [target]


#: issue 13: A2A 1.0 is done when SendMessage and GetTask are within 10 % of 0.3 in the same run
WITHIN = 0.9
#: each 1.0 scenario and the 0.3 one it is compared with, with their method names
VERSION_PAIRS = (("send10", "send", "SendMessage", "message/send"), ("get10", "get", "GetTask", "tasks/get"))


def _cpu_us(result: dict[str, Any], scenario: str, server: str, c: int) -> float | None:
    """The server's CPU per good answer, in µs (less sensitive than throughput to a busy machine)."""
    run = _get(result, "scenarios", scenario, server, f"c{c}")
    if not run or not run.get("rps") or run.get("server_cpu_pct") is None:
        return None
    return round(float(run["server_cpu_pct"]) / 100 / float(run["rps"]) * 1e6, 1)


def version_ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each 1.0 run beside its 0.3 counterpart on the same server and concurrency, in this run:
    throughput of good answers, 1.0 / 0.3 (``within``: at least 0.9, issue 13's bound), and the
    server's CPU per answer in each (``cpu_ratio``: 1.0 / 0.3, lower is cheaper)."""
    out = []
    scen = result.get("scenarios", {})
    for new, old, new_method, old_method in VERSION_PAIRS:
        for server, runs in (scen.get(new) or {}).items():
            for key in sorted((k for k in runs if k.startswith("c")), key=lambda k: int(k[1:])):
                c = int(key[1:])
                rps_new, rps_old = _rps(result, new, server, c), _rps(result, old, server, c)
                ratio = _ratio(rps_new, rps_old)
                cpu_new, cpu_old = _cpu_us(result, new, server, c), _cpu_us(result, old, server, c)
                out.append(
                    {
                        "server": server,
                        "scenario": new,
                        "baseline": old,
                        "method": new_method,
                        "baseline_method": old_method,
                        "connections": c,
                        "rps": rps_new,
                        "baseline_rps": rps_old,
                        "ratio": ratio,
                        "within": None if ratio is None else ratio >= WITHIN,
                        "cpu_us": cpu_new,
                        "baseline_cpu_us": cpu_old,
                        "cpu_ratio": _ratio(cpu_new, cpu_old),
                    }
                )
    return out


#: issue 25: OpenWOP v2 is done when GET and POST a run are within 10 % of v1 in the same run (and ``WITHIN``)
MAJOR_OPS = (("get", "GET a run"), ("create", "POST a run"))


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def major_ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each OpenWOP operation at major 2 beside major 1 on one server, in this run: the median good answers/s
    of the turns each major took, the median of the turns' v2 / v1 ratios (each turn's two runs are
    neighbours in time, so a machine that slows down between turns slows both alike; ``within``: at
    least 0.9), and the server's CPU per answer in each."""
    out = []
    for server, entry in (_get(result, "scenarios", "openwop") or {}).items():
        for op, label in MAJOR_OPS:
            turns = {major: entry.get(f"{major}-{op}") or [] for major in ("v1", "v2")}
            rps = {m: _median([float(r["rps"]) for r in runs if r.get("requests")]) for m, runs in turns.items()}
            cpu = {
                m: _median(
                    [
                        r["server_cpu_pct"] / 100 / r["rps"] * 1e6
                        for r in runs
                        if r.get("rps") and r.get("server_cpu_pct")
                    ]
                )
                for m, runs in turns.items()
            }
            pairs = [
                _ratio(float(new["rps"]), float(old["rps"]))
                for old, new in zip(turns["v1"], turns["v2"], strict=False)
                if old.get("requests") and new.get("requests")
            ]
            ratio = _median([p for p in pairs if p is not None])
            out.append(
                {
                    "server": server,
                    "operation": label,
                    "turns": len(turns["v2"]),
                    "v1_rps": rps["v1"],
                    "v2_rps": rps["v2"],
                    "ratio": ratio,
                    "within": None if ratio is None else ratio >= WITHIN,
                    "v1_cpu_us": None if cpu["v1"] is None else round(cpu["v1"], 1),
                    "v2_cpu_us": None if cpu["v2"] is None else round(cpu["v2"], 1),
                }
            )
    return out


GRANIAN = "-granian"
#: the request/response scenarios and their methods, for the two stacks side by side
STACK_SCENARIOS = (("send", "message/send"), ("get", "tasks/get"), ("send10", "SendMessage"), ("get10", "GetTask"))


def stack_ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each server measured on both stacks in this run (``X`` on uvicorn, ``X-granian`` on granian):
    good answers/s and the server's CPU per answer on each, granian / uvicorn; for the fan-outs,
    the delivery p50 and p99 on each (lower is better)."""
    out: list[dict[str, Any]] = []
    scen = result.get("scenarios", {})
    for scenario, method in STACK_SCENARIOS:
        runs = scen.get(scenario) or {}
        for server in (s for s in runs if not s.endswith(GRANIAN) and s + GRANIAN in runs):
            keys = sorted((k for k in runs[server] if k.startswith("c")), key=lambda k: int(k[1:]))
            for c in (int(k[1:]) for k in keys):
                uvi, gra = _rps(result, scenario, server, c), _rps(result, scenario, server + GRANIAN, c)
                cpu_uvi, cpu_gra = _cpu_us(result, scenario, server, c), _cpu_us(result, scenario, server + GRANIAN, c)
                out.append(
                    {
                        "server": server,
                        "what": f"{method}, c={c}",
                        "uvicorn": uvi,
                        "granian": gra,
                        "ratio": _ratio(gra, uvi),
                        "uvicorn_cpu_us": cpu_uvi,
                        "granian_cpu_us": cpu_gra,
                        "cpu_ratio": _ratio(cpu_gra, cpu_uvi),
                    }
                )
    streams = scen.get("resubscribe") or {}
    for server in (s for s in streams if not s.endswith(GRANIAN) and s + GRANIAN in streams):
        for key in sorted((k for k in streams[server] if k.startswith("fanout_")), key=lambda k: int(k[7:])):
            uvi, gra = streams[server][key].get("delivery_ms", {}), streams[server + GRANIAN].get(key, {})
            gra = gra.get("delivery_ms", {})
            for pct in ("p50", "p99"):
                out.append(
                    {
                        "server": server,
                        "what": f"fan-out {int(key[7:]):,}, delivery {pct} (ms, lower is better)",
                        "uvicorn": uvi.get(pct),
                        "granian": gra.get(pct),
                        "ratio": _ratio(gra.get(pct), uvi.get(pct)),
                    }
                )
    return out


# --- markdown -------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _servers(result: dict[str, Any]) -> list[str]:
    return list(result.get("servers", {}))


def _status_cell(result: dict[str, Any], server: str) -> str | None:
    entry = result["servers"].get(server, {})
    if entry.get("status") == "skipped":
        return f"skipped: {entry.get('reason', '')}"
    return None


def _wrk_cell(run: dict[str, Any] | None) -> str:
    if not run:
        return "–"
    cell = f"**{_fmt(run['rps'], 0)}**/s · {_fmt(run['p50_ms'], 2)} / {_fmt(run['p99_ms'], 1)} ms"
    if run.get("failed"):
        cell += f" · ⚠ {run['failed']:,} failed"
    if (run.get("others_cpu_pct") or 0) > BUSY_PCT:
        cell += f" · ⚠ others {run['others_cpu_pct']:.0f} %"
    return cell


def _lat_cell(summary: dict[str, Any] | None) -> str:
    if not summary or not summary.get("n"):
        return "–"
    return f"{_fmt(summary['p50'], 2)} / {_fmt(summary['p99'], 2)} ms"


def markdown(result: dict[str, Any]) -> str:
    meta = result.get("meta", {})
    m = meta.get("machine", {})
    lines = [
        f"# Tether benchmarks: {meta.get('started', '?')} ({meta.get('profile', {}).get('name', '?')} profile)",
        "",
        f"Machine: {m.get('nproc')} cores ({m.get('cpu_model')}), {m.get('memory_gib')} GiB, Linux {m.get('kernel')}, "
        f"Python {m.get('python')}, {m.get('wrk')}; Tether {m.get('versions', {}).get('tether')} at {m.get('git')}, "
        f"a2a-sdk {m.get('versions', {}).get('a2a-sdk')}, uvicorn {m.get('versions', {}).get('uvicorn')}.",
        f"Command: `{meta.get('command')}`; took {meta.get('duration_s')} "
        f"s{'' if meta.get('complete', True) else ' (INCOMPLETE: a scenario failed)'}.",
    ]
    background = meta.get("background_cpu_pct_at_start")
    if background is not None:
        lines.append(
            f'Other processes used {background} % of a core when the run began; a wrk cell marked "⚠ others N %" '
            "ran while other "
            f"processes (for Tether on PostgreSQL: the database server too) took N % of a core."
        )
    if meta.get("profile", {}).get("name") == "quick":
        lines += [
            "",
            "**Quick profile: one-second runs and tiny counts. These numbers prove the harness works; they measure "
            "nothing.**",
        ]
    servers = _servers(result)
    scen = result.get("scenarios", {})

    lines += [
        "",
        "## Servers",
        "",
        "| server | status | ready after | RSS at rest | RSS peak under load | CPU at rest |",
        "|---|---|---|---|---|---|",
    ]
    for name in servers:
        e = result["servers"][name]
        if e.get("status") != "ok":
            lines.append(f"| {e.get('label', name)} | {e.get('status')}: {e.get('reason', '')} | | | | |")
            continue
        lines.append(
            f"| {e['label']} | ok | {_fmt(e.get('ready_s'), 2)} s | {_fmt(e.get('rss_rest_mb'))} MB | "
            f"{_fmt(e.get('rss_load_peak_mb'))} MB | {_fmt(e.get('cpu_rest_pct'), 2)} % |"
        )

    if "send" in scen or "get" in scen:
        lines += ["", "## Request/response (wrk, one thread): good answers/s · p50 / p99 latency", ""]
        lines.append("| scenario | " + " | ".join(result["servers"][s]["label"] for s in servers) + " |")
        lines.append("|---" * (len(servers) + 1) + "|")
        rows: list[tuple[str, str, str]] = []
        for key in sorted(
            _get(scen, "send", next((s for s in servers if _get(scen, "send", s)), "")) or {}, key=lambda k: int(k[1:])
        ):
            rows.append((f"message/send, blocking echo, c={key[1:]}", "send", key))
        for key in sorted({k for s in servers for k in (_get(scen, "get", s) or {}) if k.startswith("c")}):
            rows.append((f"tasks/get, existing task, c={key[1:]}", "get", key))
        for label, scenario, key in rows:
            cells = [_status_cell(result, s) or _wrk_cell(_get(scen, scenario, s, key)) for s in servers]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")

    majors = major_ratios(result)
    if majors:
        lines += [
            "",
            "## OpenWOP v2 beside v1 (Tether, same server, same runs, taking turns): median good answers/s",
            "",
            "`GET /v1/runs/{id}` and `GET /runs/{tenant}~2F{id}` read the same runs; `POST /v1/runs` and `POST /runs` "
            "each start an echo run. Issue 25's bound: v2 within 10 % of v1 (v2 / v1 ≥ 0.9); the ratio is the "
            "median of each turn's, whose two runs are neighbours in time.",
            "",
            "| operation | server | turns | v1 | v2 | v2 / v1 | server CPU per answer, v1 → v2 |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in majors:
            verdict = "–" if r["ratio"] is None else f"**{r['ratio']:.2f}**" + ("" if r["within"] else " ⚠")
            label = result["servers"].get(r["server"], {}).get("label", r["server"])
            lines.append(
                f"| {r['operation']} c=32 | {label} | {r['turns']} | {_fmt(r['v1_rps'], 0)} | {_fmt(r['v2_rps'], 0)} | "
                f"{verdict} | {_fmt(r['v1_cpu_us'])} → {_fmt(r['v2_cpu_us'])} µs |"
            )

    ratios = version_ratios(result)
    if ratios:
        lines += [
            "",
            "## A2A 1.0 beside 0.3 (Tether, same server, same run): good answers/s · p50 / p99 latency",
            "",
            "The 1.0 requests are the 0.3 ones in ProtoJSON with `A2A-Version: 1.0`; `GetTask` reads the same "
            "completed tasks as `tasks/get`. The a2a-sdk 0.3.26 reference and the bare ceiling speak A2A 0.3 only, "
            "so they have no 1.0 rows. Issue 13's bound: 1.0 within 10 % of 0.3 (1.0 / 0.3 ≥ 0.9). On a busy "
            "machine the CPU the server spent per good answer compares the two better than throughput does.",
            "",
            "| scenario | server | 0.3 | 1.0 | 1.0 / 0.3 | server CPU per answer, 0.3 → 1.0 (1.0 / 0.3) |",
            "|---|---|---|---|---|---|",
        ]
        for r in ratios:
            if r["ratio"] is None:
                verdict = "– (0.3 not measured)"
            else:
                verdict = f"**{r['ratio']:.2f}**" + ("" if r["within"] else f" ⚠ {100 * (1 - r['ratio']):.0f} % slower")
            label = result["servers"].get(r["server"], {}).get("label", r["server"])
            old = _wrk_cell(_get(scen, r["baseline"], r["server"], f"c{r['connections']}"))
            new = _wrk_cell(_get(scen, r["scenario"], r["server"], f"c{r['connections']}"))
            cpu = "–"
            if r.get("cpu_ratio") is not None:
                cpu = f"{_fmt(r['baseline_cpu_us'])} → {_fmt(r['cpu_us'])} µs ({r['cpu_ratio']:.2f})"
            lines.append(
                f"| {r['method']} vs {r['baseline_method']}, c={r['connections']} | {label} | {old} | {new} | "
                f"{verdict} | {cpu} |"
            )

    stream_servers = [s for s in servers if not s.startswith(BARE)]
    if "stream" in scen or "resubscribe" in scen:
        lines += ["", "## Streams (lean asyncio client): p50 / p99", ""]
        lines.append("| scenario | " + " | ".join(result["servers"][s]["label"] for s in stream_servers) + " |")
        lines.append("|---" * (len(stream_servers) + 1) + "|")

        def row(label: str, cell: Any) -> None:
            lines.append(
                f"| {label} | " + " | ".join(_status_cell(result, s) or cell(s) for s in stream_servers) + " |"
            )

        if "stream" in scen:
            row("message/stream: request → first event", lambda s: _lat_cell(_get(scen, "stream", s, "first_event_ms")))
            row(
                "message/stream: request → completion (last event)",
                lambda s: _lat_cell(_get(scen, "stream", s, "complete_ms")),
            )
        if "resubscribe" in scen:
            na = "n/a (no task waits in the echo reference)"
            row(
                "tasks/resubscribe: attach → first event",
                lambda s: (
                    _lat_cell(_get(scen, "resubscribe", s, "attach", "attach_ms"))
                    if _get(scen, "resubscribe", s)
                    else na
                ),
            )
            sizes = sorted(
                {
                    int(k.split("_")[1])
                    for s in stream_servers
                    for k in (_get(scen, "resubscribe", s) or {})
                    if k.startswith("fanout_")
                }
            )
            for size in sizes:

                def fan(s: str, size: int = size) -> str:
                    f = _get(scen, "resubscribe", s, f"fanout_{size}")
                    if not f:
                        return na
                    total = f["streams"] * f.get("rounds", 1)
                    delivered = f"{f['delivered']:,}/{total:,} delivered"
                    return f"{_lat_cell(f['delivery_ms'])} · {delivered} · RSS peak {_fmt(f.get('rss_peak_mb'))} MB"

                row(f"fan-out, {size:,} resubscribers on one task: reply sent → next event, every stream", fan)

    stacks = result.get("uvicorn_vs_granian") or []
    if stacks:
        lines += [
            "",
            "## uvicorn beside granian (same app, same run): granian / uvicorn",
            "",
            "Throughput: above 1 granian answered more. Server CPU per good answer (the whole process tree): "
            "below 1 granian spent less. A machine shared with other work moves both; compare several runs.",
            "",
            "| server | measured | uvicorn | granian | granian / uvicorn | server CPU per answer, uvicorn → granian |",
            "|---|---|---|---|---|---|",
        ]
        for r in stacks:
            ratio = "–" if r["ratio"] is None else f"**{r['ratio']:.2f}**"
            cpu = "–"
            if r.get("cpu_ratio") is not None:
                cpu = f"{_fmt(r['uvicorn_cpu_us'])} → {_fmt(r['granian_cpu_us'])} µs ({r['cpu_ratio']:.2f})"
            lines.append(
                f"| {r['server']} | {r['what']} | {_fmt(r['uvicorn'])} | {_fmt(r['granian'])} | {ratio} | {cpu} |"
            )
    restarts = scen.get("restart", {})
    if restarts:
        lines += ["", "## Restart (Tether, store full of runs waiting at approval gates)", ""]
        lines += [
            "| server | waiting runs | fill (REST) | start → `serving on` line | start → first answered read | "
            "resumed (host's count) | RSS after start |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, entry in restarts.items():
            if "skipped" in entry:
                lines.append(f"| {name} | skipped: {entry['skipped']} | | | | | |")
                continue
            for r in entry["runs"]:
                verified = " (2 accepted after restart: completed)" if r.get("resume_verified") else ""
                if r.get("resume_verified") is False:
                    verified = " (⚠ 2 accepted after restart: not completed)"
                if r.get("not_at_gate"):
                    verified += f" · ⚠ {r['not_at_gate']} run(s) never reached the gate before the stop"
                lines.append(
                    f"| {name} | {r['waiting_runs']:,} | {_fmt(r.get('fill_s'))} s | {_fmt(r['announced_s'], 2)} s "
                    f"| **{_fmt(r['serving_s'], 2)} s** | "
                    f"{_fmt(r.get('resumed'))} at {_fmt(r.get('resumed_s'), 2)} s{verified} | "
                    f"{_fmt(r.get('rss_mb'))} MB |"
                )
    rests = scen.get("rest", {})
    if rests:
        lines += [
            "",
            "## At rest with runs waiting at approval gates",
            "",
            "| server | waiting runs | CPU (window) | RSS |",
            "|---|---|---|---|",
        ]
        for name, entry in rests.items():
            if "skipped" in entry:
                lines.append(f"| {name} | skipped: {entry['skipped']} | | |")
                continue
            lines.append(
                f"| {name} | {entry['waiting_runs']:,} | **{_fmt(entry['cpu_pct'], 2)} %** "
                f"({_fmt(entry['window_s'])} s) | {_fmt(entry['rss_mb'])} MB |"
            )

    if scen.get("outbox"):
        lines += outbox_markdown(scen["outbox"])
    if scen.get("crash"):
        lines += crash_markdown(scen["crash"])

    lines += [
        "",
        "## Targets (issues 6 and 12), each measured in this run",
        "",
        "| target | measured | bound | result |",
        "|---|---|---|---|",
    ]
    for t in result.get("targets", []):
        verdict = "not measured" if t["pass"] is None else ("**PASS**" if t["pass"] else "**FAIL**")
        value = "–" if t["value"] is None else f"{_fmt(float(t['value']), 2)} {t['unit']}"
        detail = f" ({t['detail']})" if t.get("detail") else ""
        lines.append(f"| {t['what']} | {value}{detail} | {t['op']} {_fmt(t['threshold'])} {t['unit']} | {verdict} |")

    for key, prof in result.get("profiles", {}).items():
        method = prof.get("method", key.split()[-1])
        what = {
            "send": "message/send",
            "get": "tasks/get",
            "send10": "SendMessage (1.0)",
            "get10": "GetTask (1.0)",
        }.get(method, method)
        lines += [
            "",
            f"## Profile: py-spy on {prof.get('server') or key.split()[0]} during {what} c=32 (an extra run, not "
            "the measured one)",
            "",
        ]
        if "skipped" in prof:
            lines.append(prof["skipped"])
            continue
        threads = ", ".join(f"{k} {v:,}" for k, v in prof.get("threads", {}).items())
        busy = prof.get("main_thread_busy_pct")
        lines += [
            f"{prof['samples']:,} busy samples at {prof.get('rate')} Hz over {prof.get('seconds')} s ({threads}); "
            f"the event-loop thread was busy {_fmt(busy)} % of the time; {_fmt(prof.get('rps_while_profiled'), 0)} "
            "req/s while sampled. "
            f"Raw stacks: `{prof['file']}`.",
            "",
            "| main thread: own time | function | main thread: inclusive, Tether's code | function |",
            "|---|---|---|---|",
        ]
        for (own, own_fn), (inc, inc_fn) in zip(prof["top_self"], prof["top_inclusive"], strict=False):
            lines.append(f"| {own:.1f} % | `{own_fn}` | {inc:.1f} % | `{inc_fn}` |")
        if prof.get("top_workers"):
            lines += [
                "",
                "Store threads (share of their busy samples): "
                + "; ".join(f"`{fn}` {p:.1f} %" for p, fn in prof["top_workers"]),
            ]
    return "\n".join(lines) + "\n"


_LEGS = (
    ("burst_webhook_1", "burst: webhooks, 1 receiver"),
    ("burst_webhook_10", "burst: webhooks, 10 receivers"),
    ("burst_push_1", "burst: A2A pushes, 1 receiver"),
    ("burst_push_10", "burst: A2A pushes, 10 receivers"),
    ("sustained", "sustained: pushes + webhooks at a fixed rate, 1 receiver"),
    ("backlog", "backlog drain: webhooks, 1 receiver"),
)


def _leg_cell(leg: dict[str, Any] | None) -> str:
    if not leg:
        return "–"
    if "skipped" in leg:
        return f"skipped: {leg['skipped']}"
    rate = leg.get("receipt_rate_per_s") if "fill_s" in leg else leg.get("deliveries_per_s")
    cell = f"**{_fmt(rate, 0)}**/s · {_lat_cell(leg.get('latency_ms'))}"
    cell += f" · {leg.get('delivered', 0):,}/{leg.get('expected', 0):,}"
    if leg.get("duplicates"):
        cell += f" ({leg['duplicates']:,} sent twice)"
    cell += f" · host {_fmt(leg.get('host_cpu_pct'))} % ({_fmt(leg.get('host_cpu_ms_per_delivery'), 2)} ms/delivery)"
    if (leg.get("others_cpu_pct") or 0) > BUSY_PCT:
        cell += f" · ⚠ others {leg['others_cpu_pct']:.0f} %"
    return cell


def outbox_markdown(box: dict[str, Any]) -> list[str]:
    """The outbox scenario's tables: the ceilings, then every leg per Tether."""
    names = [k for k in box if k != "ceilings"]
    lines = [
        "",
        "## Outbox: deliveries/s · commit → receipt p50 / p99 · delivered · host CPU",
        "",
        "(backlog: the drain rate, first to last receipt; its latencies include the time the rows waited)",
        "",
        "| leg | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for key, label in _LEGS:
        lines.append(
            f"| {label} | "
            + " | ".join(_leg_cell(box[n] if "skipped" in box[n] else box[n].get(key)) for n in names)
            + " |"
        )
    ceilings = box.get("ceilings", {})
    wrk = ceilings.get("receiver_wrk", {})
    lines += [
        "",
        f"Receiver alone (wrk, c=16, TLS keep-alive): **{_fmt(wrk.get('rps'), 0)}** req/s at "
        f"{_fmt(wrk.get('receiver_cpu_pct'))} % CPU ({wrk.get('processes')} process).",
    ]
    for build, c in ceilings.get("egress_client", {}).items():
        if "error" in c:
            lines.append(f"Egress client alone ({build}): did not run: {c['error']}")
            continue
        failed = f", {c['failed']} requests failed" if c.get("failed") else ""
        lines.append(
            f"Egress client alone ({build}, 16 in flight, no store): **{_fmt(c.get('rps'), 0)}** req/s at "
            f"{_fmt(c.get('cpu_pct'))} % CPU{failed}."
        )
    for name in names:
        rounds = _get(box, name, "compare", "rounds") or []
        if rounds:
            cells = ", ".join(f"{r['build']} {_fmt(r.get('deliveries_per_s'), 0)}/s" for r in rounds)
            lines.append(f"Compared with `{box[name]['compare']['src']}` on {name}, taking turns: {cells}.")
    return lines


def crash_markdown(crash: dict[str, Any]) -> list[str]:
    """The crash scenario's table: per Tether and deliveries in flight, what each kill re-sent."""
    lines = [
        "",
        "## Crash: SIGKILL under load, deliveries sent again per kill",
        "",
        "(each re-sent request charged to the first kill after the request it repeats; the receipt's age at the "
        "kill is how long the host had had its 2xx without recording it, kill latency included)",
        "",
        "| server | in flight per receiver | kills | deliveries | re-sent per kill (max) | receipt's age at the kill "
        "p50 / max | every delivery arrived |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, legs in crash.items():
        if "skipped" in legs:
            lines.append(f"| {name} | skipped: {legs['skipped']} | | | | | |")
            continue
        for leg in legs.values():
            if "error" in leg:
                lines.append(f"| {name} | {leg.get('concurrency')} | stopped: {leg['error']} | | | | **no** |")
                continue
            age = leg.get("received_before_the_kill_ms") or {}
            lines.append(
                f"| {name} | {leg.get('concurrency')} | {leg.get('kills')} | {leg.get('distinct', 0):,} | "
                f"**{_fmt(leg.get('per_kill'), 2)}** ({leg.get('per_kill_max')}) | {_fmt(age.get('p50'))} / "
                f"{_fmt(age.get('max'))} ms | {'yes' if leg.get('complete') else '**no**'} |"
            )
    return lines


# --- py-spy ---------------------------------------------------------------------------------

_LINE = re.compile(r":\d+\)$")
_THREAD = re.compile(r"^thread \(\d+\): (.*?)(?:_\d+)?$")
_NATIVE = "Runner.run (asyncio/runners.py)"


def top_functions(
    raw: str, count: int = 10, *, seconds: float | None = None, rate: int | None = None
) -> dict[str, Any]:
    """The hottest functions in a py-spy raw (collapsed, ``-t``) profile, per thread.

    py-spy drops idle samples, so each count is time a thread was busy. The main thread
    runs the event loop and every line of Python the request path executes, holding the
    GIL; the store's reader and writer threads mostly wait inside SQLite's C code (which
    releases the GIL). A main-thread sample whose innermost Python frame is the asyncio
    runner is time in native code under it: uvloop's I/O and httptools' parsing.
    """
    per_thread: Counter[str] = Counter()
    main_own: Counter[str] = Counter()
    main_incl: Counter[str] = Counter()
    worker_own: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = [_LINE.sub(")", f) for f in stack.split(";")]
        match = _THREAD.match(frames[0])
        thread = match.group(1) if match else "?"
        frames = frames[1:] if match else frames
        if not frames:
            continue
        samples = int(n)
        per_thread[thread] += samples
        leaf = frames[-1]
        if thread == "MainThread":
            main_own[leaf if leaf != _NATIVE else "(native: uvloop I/O, httptools; under asyncio Runner.run)"] += (
                samples
            )
            if _NATIVE in frames:  # the launcher's frames (runpy, click, uvicorn.run) are in every sample
                frames = frames[frames.index(_NATIVE) + 1 :]
            for frame in set(frames):
                main_incl[frame] += samples
        else:
            worker_own[f"[{thread}] {leaf}"] += samples
    main_total = per_thread.get("MainThread", 0)
    worker_total = sum(per_thread.values()) - main_total

    def pct(items: list[tuple[str, int]], total: int) -> list[tuple[float, str]]:
        return [(round(100 * v / total, 1), k) for k, v in items] if total else []

    # inclusive: Tether's own functions (its middleware, routes, handlers, engine, store calls)
    inclusive = [(k, v) for k, v in main_incl.most_common() if "(tether/" in k][:count]
    expected = seconds * rate if seconds and rate else None
    return {
        "samples": sum(per_thread.values()),
        "threads": dict(per_thread.most_common()),
        "main_thread_busy_pct": round(100 * main_total / expected, 1) if expected else None,
        "top_self": pct(main_own.most_common(count), main_total),
        "top_inclusive": pct(inclusive, main_total),
        "top_workers": pct(worker_own.most_common(5), worker_total),
    }


def main(argv: list[str] | None = None) -> int:
    """``python bench/report.py RESULT.json``: judge the targets again and print the markdown."""
    import json
    import sys

    paths = argv if argv is not None else sys.argv[1:]
    if len(paths) != 1:
        print("usage: python bench/report.py bench/results/<timestamp>.json", file=sys.stderr)
        return 2
    with open(paths[0]) as f:
        result = json.load(f)
    result["targets"] = targets(result)
    print(markdown(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
