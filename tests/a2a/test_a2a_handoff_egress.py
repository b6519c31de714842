"""A hand-off to an address the egress guard refuses fails at once with ``egress_denied``, sending nothing.

The real guard of a real host decides (no peer is involved): a private address, a
loopback name and a plain-HTTP URL are each refused before any connection is made, and
the run fails with a message that names the refusal instead of retrying for hours.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from backends import Hosts
from harness import wait_until
from inproc import InProcessHost
from workflow_docs import node, workflow_doc

REFUSED = {
    "private": "https://10.0.0.5:8443",
    "loopback-name": "https://localhost:8443",
    "plain-http": "http://peer.example.com",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_peer_fails_the_node_with_egress_denied(
    start_host: Hosts[InProcessHost], tmp_path: Path, case: str
) -> None:
    folder = tmp_path / "workflows"
    folder.mkdir()
    handoff = node(
        "peer",
        "vendor.tether.a2a-handoff",
        config={"agent": REFUSED[case], "skill": "echo"},
        inputs={"prompt": {"type": "static", "value": "hello"}},
    )
    (folder / "hand-refused.json").write_text(json.dumps(workflow_doc("hand-refused", [handoff], [])))
    host = start_host("--workflows", str(folder))
    assert host.dev_key
    http = host.http(host.dev_key)
    created = http.post("/v1/runs", json={"workflowId": "hand-refused", "inputs": {}})
    assert created.status_code == 201, created.text
    run_id = created.json()["runId"]

    def failed() -> dict[str, Any] | None:
        doc: dict[str, Any] = http.get(f"/v1/runs/{run_id}").json()
        return doc if doc["status"] == "failed" else None

    doc = wait_until(failed, timeout=20, what="the hand-off to fail")
    error = doc["error"]
    assert error["code"] == "egress_denied", error
    assert "egress guard refused" in error["message"] and REFUSED[case].split("//")[1].split(":")[0] in error["message"]
    types = [e["type"] for e in http.get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()["events"]]
    assert types.count("run.started") == 1 and "node.failed" in types
