"""Two hosts on one PostgreSQL database: a run that changes on one reaches a runs watch on the other.

The watch learns of the other host's commits from the same LISTEN/NOTIFY hints that wake
per-run streams; nothing polls (the fallback poll is set past the test's deadlines, and
the watch has none).
"""

from __future__ import annotations

import sys
from pathlib import Path

from backends import Hosts
from harness import wait_until
from inproc import InProcessHost

_E2E = Path(__file__).resolve().parents[1] / "e2e"
if str(_E2E) not in sys.path:
    sys.path.insert(0, str(_E2E))

from test_runs_watch import Frame, _of, watching  # noqa: E402 - the e2e suite's stream reader


def test_a_run_created_and_answered_on_one_host_is_watched_live_on_the_other(
    start_host: Hosts[InProcessHost], shared_database: str, tmp_path: Path
) -> None:
    args = ("--fallback-poll-seconds", "120", "--secret-key-file", str(tmp_path / "shared.key"))
    one = start_host(*args, name="one", database_url=shared_database)
    two = start_host(*args, name="two", database_url=shared_database)
    assert one.dev_key
    key = one.dev_key
    elsewhere = two.http(key)
    with watching(one, key) as watch:
        assert watch.next().event == "sync"

        def heard() -> Frame | None:  # until host one listens for hints (it starts to at start-up)
            created = elsewhere.post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "hello"}})
            assert created.status_code == 201
            try:
                return watch.next(_of(created.json()["runId"], "completed"), timeout=2)
            except AssertionError:
                return None

        wait_until(heard, timeout=30, what="host one to hear host two's commits")
        created = elsewhere.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "draft"}})
        run_id = created.json()["runId"]
        waiting = watch.next(_of(run_id, "waiting-approval"), timeout=10)
        assert waiting.data["interrupt"]["nodeId"] == "gate"
        answered = elsewhere.post(f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
        assert answered.status_code == 200, answered.text
        done = watch.next(_of(run_id, "completed"), timeout=10)
    assert done.data["lastSequence"] == one.http(key).get(f"/v1/runs/{run_id}").json()["lastSequence"]
    assert done.data["lastSequence"] > waiting.data["lastSequence"]
