"""Crash at every reachable failpoint of every scenario, on both stores, and check the invariants.

For each (scenario, store): one traced run learns which failpoints each armable host
reaches and how often; then one run per (host, failpoint, hit) crashes that host exactly
there (each commit; any other point at its first hit and its last), starts it again
unarmed, finishes the scenario and checks it. Each test adds its tally to the session's
``faults:`` line (tests/conftest.py prints it). ``pytest -m faults`` runs them (.ci/run).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pg
import pytest
from crash import crash, trace
from scenarios import SCENARIOS

from tether import failpoints

pytestmark = [
    pytest.mark.faults,
    pytest.mark.process,
    pytest.mark.timeout(1800),
    # a host killed during a client's TLS handshake leaves that socket to the collector
    pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"),
]

#: the commit windows are crashed at every hit (each commit of the scenario), up to this many;
#: the other failpoints at their first hit and their last
EVERY_HIT = ("store.commit.before", "store.commit.after")
MOST_HITS = 8

STORES = ("sqlite", "postgres")


def _database(store: str):  # type: ignore[no-untyped-def]
    from contextlib import nullcontext

    return pg.migrated_database() if store == "postgres" else nullcontext(None)


def record(tally: dict[str, object]) -> None:
    """Add one test's tally to the session's (``TETHER_FAULTS_RESULTS``, set by tests/conftest.py)."""
    folder = os.environ.get("TETHER_FAULTS_RESULTS")
    if folder:
        with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as out:
            out.write(json.dumps(tally) + "\n")


def crashes(name: str, store: str, tmp_path: Path) -> dict[str, object]:
    """Trace ``name`` on ``store``, then crash it at each reachable failpoint; its tally."""
    scenario = SCENARIOS[name]
    started = time.monotonic()
    with _database(store) as database:
        reached, violations = trace(scenario, tmp_path / "trace", store, database)
    assert not violations, f"{name} on {store} fails without any crash: {violations}"
    found: list[str] = []
    pairs, died = [], 0
    for host, counts in reached.items():
        for point, count in sorted(counts.items()):
            hits = range(1, min(count, MOST_HITS) + 1) if point in EVERY_HIT else {1, count}
            for nth in sorted(hits):
                pairs.append((host, point, nth))
    for index, (host, point, nth) in enumerate(pairs):
        with _database(store) as database:
            crashed, violations = crash(scenario, tmp_path / f"c{index}", store, database, host, point, nth)
        died += crashed
        found += [f"{name}/{store}: {host} at {point}#{nth}: {v}" for v in violations]
    unreached = sorted(set(failpoints.REGISTRY) - {p for counts in reached.values() for p in counts})
    return {
        "scenario": name,
        "store": store,
        "points": sorted({(h, p) for h, p, _ in pairs}),
        "crashes": died,
        "runs": len(pairs),
        "unreached": unreached,
        "violations": found,
        "seconds": round(time.monotonic() - started, 1),
    }


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_crash_at_every_reachable_failpoint(name: str, store: str, tmp_path: Path) -> None:
    tally = crashes(name, store, tmp_path)
    record(tally)
    print(json.dumps(tally, indent=1))
    assert not tally["violations"], "\n".join(tally["violations"])  # type: ignore[arg-type]
