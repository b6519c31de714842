"""A SIGKILL between a hand-off's send and its record: one effect, two attempts, one Idempotency-Key on the wire.

Host A is a real ``tether serve`` process whose hand-off pauses between its SendMessage and
what it records of it (``--test-handoff-pause-file``, a test seam). The peer is a small
scripted A2A 0.3 agent on loopback HTTPS that records every request's headers and finds the
task of a message it has seen again by its ``messageId``, as an idempotent peer does.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme
from backends import Hosts
from harness import HostProcess, wait_until
from workflow_docs import node, workflow_doc

pytestmark = pytest.mark.process  # SIGKILL

V2 = {"OpenWOP-Version": "2.0"}


class RecordingPeer:
    """An A2A 0.3 agent that completes each task at once and keeps every JSON-RPC request it was sent."""

    def __init__(self, folder: Path) -> None:
        ca = trustme.CA()
        self.ca_file = folder / "peer-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        self.calls: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self._tasks: dict[str, str] = {}  # messageId -> task id
        self._lock = threading.Lock()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                card = {
                    "protocolVersion": "0.3.0",
                    "name": "recording peer",
                    "url": peer.url + "/rpc",
                    "preferredTransport": "JSONRPC",
                    "capabilities": {"pushNotifications": False, "streaming": False},
                }
                self._answer(card)

            def do_POST(self) -> None:  # noqa: N802
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                headers = {k.lower(): v for k, v in self.headers.items()}
                params = request.get("params", {})
                with peer._lock:
                    peer.calls.append((request["method"], headers, params))
                    if request["method"] == "message/send":
                        message_id = params["message"]["messageId"]
                        task_id = peer._tasks.setdefault(message_id, f"task-{len(peer._tasks) + 1}")
                    else:
                        task_id = params.get("id", "task-1")
                task = {
                    "kind": "task",
                    "id": task_id,
                    "contextId": f"ctx-{task_id}",
                    "status": {"state": "completed"},
                    "artifacts": [{"artifactId": "a1", "parts": [{"kind": "text", "text": "done"}]}],
                }
                self._answer({"jsonrpc": "2.0", "id": request.get("id"), "result": task})

            def _answer(self, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def sends(self) -> list[tuple[dict[str, str], dict[str, Any]]]:
        with self._lock:
            return [(headers, params) for method, headers, params in self.calls if method == "message/send"]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[RecordingPeer]:
    recording = RecordingPeer(tmp_path)
    yield recording
    recording.close()


def test_sigkill_between_send_and_record_resends_one_effect_under_one_key(
    tmp_path: Path, start_process: Hosts[HostProcess], peer: RecordingPeer
) -> None:
    flows = tmp_path / "workflows"
    flows.mkdir()
    prompt = {"prompt": {"type": "static", "value": "once, however often it is sent"}}
    doc = workflow_doc(
        "hand-once", [node("peer", "vendor.tether.a2a-handoff", config={"agent": peer.url}, inputs=prompt)], []
    )
    (flows / "hand-once.json").write_text(json.dumps(doc))
    marker = tmp_path / "sent"
    pause = f"--test-handoff-pause-file={marker}"
    egress = ("--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-bundle", str(peer.ca_file))
    legacy = ("--a2a-minimum-version", "0.3")  # the peer speaks 0.3 only
    host = start_process.start("--workflows", str(flows), *egress, *legacy, "--enable-test-seams", pause)
    assert host.dev_key
    with host.http(host.dev_key) as http:
        created = http.post("/v1/runs", json={"workflowId": "hand-once", "inputs": {}})
        assert created.status_code == 201, created.text
        run_id = created.json()["runId"]
    wait_until(marker.exists, what="the hand-off to pause between its send and its record")
    assert len(peer.sends()) == 1
    host.kill()
    host.args.remove(pause)
    host.start()
    with host.http(host.dev_key) as http:
        wait_until(lambda: http.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the run to complete")
        ledger = http.get(f"/runs/default~2F{run_id}/effects", headers=V2)
    assert ledger.status_code == 200, ledger.text
    sends = peer.sends()
    keys = {headers.get("idempotency-key") for headers, _ in sends}
    message_ids = {params["message"]["messageId"] for _, params in sends}
    assert len(sends) == 2, "sent again after the restart"
    assert len(keys) == 1 and None not in keys, f"one Idempotency-Key on the wire: {keys}"
    assert keys == message_ids, "the key is the message's id, which the peer finds its task by"
    effects = ledger.json()["effects"]
    assert {e["effectId"] for e in effects} == {effects[0]["effectId"]}, f"one effect: {effects}"
    assert [(e["attempt"], e["state"]) for e in effects] == [(1, "released"), (2, "completed")]
    assert {(e["nodeId"], e["keying"], e["providerKey"]) for e in effects} == {("peer", "activity-recipe", *keys)}
