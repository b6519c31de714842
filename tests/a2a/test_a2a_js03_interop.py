"""The official JavaScript client of the 0.3 generation, @a2a-js/sdk 0.3.14 (the last 0.3.x), drives Tether.

``js03/driver.mjs`` builds the client its users build (``ClientFactoryOptions.default`` plus a
credentials interceptor), runs one named scenario and prints what the SDK read beside the
raw wire it sent and read. The SDK picks the transport from the card itself: JSON-RPC 0.3
(slash methods, no ``A2A-Version``), and every answer on the wire is held to the official
A2A v0.3 schema.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from a2a_wire import WORKFLOWS
from backends import suite_host
from harness import Host, HostProcess
from node_client import NodeProject
from schemas import a2a_validator

JS03 = NodeProject(Path(__file__).resolve().parent / "js03")
_RPC = "/v1/a2a"
#: the v0.3 schema's success response for each method the driver calls
_SUCCESS = {
    "message/send": "SendMessageSuccessResponse",
    "message/stream": "SendStreamingMessageSuccessResponse",
    "tasks/get": "GetTaskSuccessResponse",
}


@pytest.fixture(scope="module")
def node() -> NodeProject:
    JS03.install()
    return JS03


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str) -> Host:
    return suite_host(request, "--workflows", str(WORKFLOWS))


def drive(node: NodeProject, host: Host, key: str, scenario: str, **args: Any) -> dict[str, Any]:
    """Run a driver scenario; the SDK spoke JSON-RPC 0.3 to the card's URL, and every answer is valid 0.3."""
    run = node.run(
        "driver.mjs", scenario, json.dumps(args), env={"TETHER_URL": host.url, "TETHER_KEY": key}, timeout=90
    )
    assert run.returncode == 0 and "result" in run.doc, run
    doc = run.doc
    assert doc["client"]["transport"].endswith("JsonRpcTransport"), doc["client"]  # the SDK's class (bundled: "_…")
    card_fetch, *calls = doc["wire"]
    assert card_fetch["url"] == f"{host.url}/.well-known/agent-card.json" and card_fetch["status"] == 200
    for call in calls:
        assert call["url"] == f"{host.url}{_RPC}" and call["method"] == "POST", call
        assert call["a2aVersion"] is None, "a 0.3 client sends no A2A-Version"
        method = call["request"]["method"]
        answers = call["response"] if isinstance(call["response"], list) else [call["response"]]
        for answer in answers:
            a2a_validator(_SUCCESS[method]).validate(answer)
    return doc


def _echoed_as_read(parts: list[dict[str, Any]], sha256: str) -> None:
    """What the SDK read of echo's artifact: the text, the file's bytes (by sha256), the URI."""
    assert parts == [
        {"kind": "text", "text": "the Q3 report"},
        {"kind": "file", "file": {"sha256": sha256, "name": "q3.bin", "mimeType": "application/x-q3"}},
        {
            "kind": "file",
            "file": {
                "uri": "https://files.example.com/q3/signed.pdf",
                "name": "signed.pdf",
                "mimeType": "application/pdf",
            },
        },
    ], parts


@pytest.mark.process  # SIGKILL
def test_a_file_round_trips_through_echo_from_get_the_stream_and_a_restart(
    node: NodeProject, host: HostProcess, key: str
) -> None:
    doc = drive(node, host, key, "files", size=1024 * 1024 + 11)
    result = doc["result"]
    assert result["states"] == ["completed"] * 3
    for read in result["read"].values():
        _echoed_as_read(read, result["sha256"])
    [get] = [c for c in doc["wire"][1:] if c["request"]["method"] == "tasks/get"]
    sent = get["response"]["result"]["artifacts"][0]["parts"][1]["file"]["bytes"]
    assert hashlib.sha256(base64.b64decode(sent)).hexdigest() == result["sha256"], "the wire itself, byte for byte"
    host.kill()
    host.start()
    again = drive(node, host, key, "filesAgain", taskIds=result["taskIds"])["result"]["read"]
    assert [r["state"] for r in again] == ["completed"] * 2
    for read in again:
        _echoed_as_read(read["parts"], result["sha256"])
