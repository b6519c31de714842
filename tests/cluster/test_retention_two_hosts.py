"""Task retention with several hosts on one PostgreSQL database: every finished run is purged
exactly once, by whichever host gets to it, and no host answers from memory a task another
host purged. The three hosts are in-process (none is killed): three apps, each with its own
task cache and purge loop, on one database."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from backends import Hosts
from harness import wait_until
from inproc import InProcessHost

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
from test_retention import _gone, _purged_total, _send  # noqa: E402


def test_two_purging_hosts_take_each_finished_run_once_and_a_third_forgets_what_they_purged(
    start_host: Hosts[InProcessHost], shared_database: str, tmp_path: Path
) -> None:
    shared = ("--secret-key-file", str(tmp_path / "shared.key"))
    one = start_host(*shared, "--task-retention", "1s", name="one", database_url=shared_database)
    two = start_host(*shared, "--task-retention", "1s", name="two", database_url=shared_database)
    keeper = start_host(*shared, "--task-retention", "0", name="keeper", database_url=shared_database)
    key = one.dev_key
    assert key
    hosts = [one.http(key), two.http(key), keeper.http(key)]
    finished = [_send(hosts[i % 3], f"m-{uuid.uuid4()}")["id"] for i in range(45)]
    waiting = [_send(hosts[i], f"m-{uuid.uuid4()}", skill="approval-gated")["id"] for i in range(3)]
    cached = finished[-1]
    assert not _gone(hosts[2], cached)  # the keeper now holds a copy of a finished task in memory

    wait_until(lambda: all(_gone(hosts[0], run_id) for run_id in finished), timeout=60, what="the purge")
    assert _purged_total(hosts[0]) + _purged_total(hosts[1]) == len(finished)  # none purged twice
    assert _purged_total(hosts[2]) == 0
    wait_until(lambda: _gone(hosts[2], cached), timeout=10, what="the keeper forgetting its copy")
    for http in hosts:
        assert all(http.get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval" for run_id in waiting)
