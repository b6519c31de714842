"""The in-process host the suites run on gives back what it took: a real process can take over its data.

Every other end-to-end module trusts ``inproc.InProcessHost`` to behave like ``tether
serve`` and to clean up after itself; this pins the part a process can check: after a
graceful stop nothing of it listens, no thread of it runs, its SQLite lock is free and
every run it acknowledged is on disk for the next host, a real one.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from harness import HostProcess, wait_until
from inproc import InProcessHost


def test_a_process_takes_over_the_data_directory_an_in_process_host_stopped(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    before = set(threading.enumerate())
    inproc = InProcessHost(data_dir).start()
    key = inproc.dev_key
    assert key, "the first start made a dev key"
    http = inproc.http(key)
    run_id = http.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "p"}}).json()["runId"]
    wait_until(lambda: http.get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval", what="the gate")
    port = int(inproc.url.rsplit(":", 1)[1])
    assert inproc.stop() == 0
    inproc.close_clients()

    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "nothing listens where the in-process host served"
    assert set(threading.enumerate()) <= before, "the in-process host left a thread behind"

    process = HostProcess(data_dir)
    try:
        process.start()  # refused if the SQLite host lock were still held
        assert process.dev_key is None, "the store already has the dev key"
        again = process.http(key)
        assert again.get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval"
        answer = again.post(f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
        assert answer.status_code == 200, answer.text
        wait_until(lambda: again.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the run to complete")
    finally:
        process.kill()
        process.close_clients()
