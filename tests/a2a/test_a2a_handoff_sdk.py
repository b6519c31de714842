"""Hand-offs to agents that are not Tether: a2a-sdk 0.3.26's and 1.3.0's stock servers, with a scripted executor.

Every test runs against both peers (``peers/sdk03_peer.py`` in this environment, speaking
0.3; ``peers/sdk13_peer.py`` in a sidecar environment, ``tests/sidecars.py``, speaking 1.0).
Each serves HTTPS with a test CA and cannot push (its card says so), so host A follows it
by polling. It echoes, or answers ``input-required``, ``auth-required`` or ``rejected`` as
the message asks. The same host runs the OpenWOP conformance fixture
``conformance-a2a-task-roundtrip`` against it: with the test seams on and
``--a2a-conformance-peer-url`` set, the fixture is advertised and its drift legs (#3
AUTH_REQUIRED → ``waiting-input``, #4 REJECTED → ``failed``/``rejected_by_remote``) pass.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a_wire import get_task, message, send, wait_state
from handoff_hosts import SECURE, Doc, assert_clean, events, outputs_of, run, until_status, write_tls
from harness import HostProcess
from sidecars import require_sidecar
from workflow_docs import node, workflow_doc

PEERS = Path(__file__).parent / "peers"
#: each peer: its script, the environment it needs (None: this one), and the A2A version its card offers
PEER_KINDS = {
    "sdk03": (PEERS / "sdk03_peer.py", None, "0.3"),
    "sdk13": (PEERS / "sdk13_peer.py", PEERS / "sdk13_requirements.txt", "1.0"),
}
ROUNDTRIP = "conformance-a2a-task-roundtrip"
HANDOFF = "vendor.tether.a2a-handoff"
#: the file both peers ask ``input-required-file`` with (the same seed as theirs)
DRAFT = random.Random(2026).randbytes(300_000)
SENT = random.Random(26).randbytes(1024 * 1024 + 5)
URI = "https://files.example.com/q3/report.pdf?rev=7"


@pytest.fixture(scope="module", params=sorted(PEER_KINDS))
def peer_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture(scope="module")
def peer_folder(tmp_path_factory: pytest.TempPathFactory, peer_kind: str) -> Path:
    return tmp_path_factory.mktemp(f"{peer_kind}-peer")


@pytest.fixture(scope="module")
def peer(peer_folder: Path, peer_kind: str) -> Iterator[tuple[str, Path]]:
    """The SDK peer's URL and the CA that signed its certificate; it records what it is sent (``received``)."""
    script, requirements, _ = PEER_KINDS[peer_kind]
    python = sys.executable if requirements is None else str(require_sidecar("a2a-sdk-1.3-peer", requirements))
    ca_file, cert, key = write_tls(peer_folder)
    record = ("--record", str(peer_folder / "received.jsonl"))
    proc = subprocess.Popen(
        [python, str(script), "--certfile", str(cert), "--keyfile", str(key), *record],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the app's lifespan has started (or the process died)
        assert "serving on " in line, f"the SDK peer did not start: {line!r}"
        yield line.split("serving on ", 1)[1].strip(), ca_file
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, peer: tuple[str, Path], peer_kind: str) -> Iterator[HostProcess]:
    peer_url, ca_file = peer
    folder = tmp_path_factory.mktemp("sdk-host")
    flows, fixtures = folder / "workflows", folder / "fixtures"
    flows.mkdir()
    fixtures.mkdir()
    prompt = {"prompt": {"type": "variable", "variableName": "prompt"}}
    variables = [{"name": "prompt", "type": "string", "required": True}]
    hand = workflow_doc(
        "hand-sdk",
        [node("peer", "vendor.tether.a2a-handoff", config={"agent": peer_url}, inputs=prompt)],
        [],
        variables,
    )
    (flows / "hand-sdk.json").write_text(json.dumps(hand))
    files = {**prompt, "files": {"type": "variable", "variableName": "message"}}  # the A2A message's files
    hand_file = workflow_doc("hand-sdk-file", [node("peer", HANDOFF, config={"agent": peer_url}, inputs=files)], [])
    (flows / "hand-sdk-file.json").write_text(json.dumps(hand_file))
    # the fixture as openwop#1028 shapes it: one node, the conformance name, skill echo, no agent, no inputs
    drift = [{"name": "driftScenario", "type": "string", "required": False}]
    roundtrip = workflow_doc(
        ROUNDTRIP, [node("invoke", "core.conformance.a2a-invoke", config={"skill": "echo"})], [], drift
    )
    (fixtures / f"{ROUNDTRIP}.json").write_text(json.dumps(roundtrip))
    args = (*SECURE, "--egress-ca-bundle", str(ca_file), "--workflows", str(flows), "--seed-fixtures", str(fixtures))
    seams = ("--enable-test-seams", "--a2a-conformance-peer-url", peer_url, "--handoff-poll-max-seconds", "0.5")
    if PEER_KINDS[peer_kind][2] == "0.3":
        seams += ("--a2a-minimum-version", "0.3")  # a legacy peer: below the default floor
    tether = HostProcess(folder / "a", *args, *seams).start()
    yield tether
    tether.close_clients()
    tether.kill()


@pytest.fixture
def a(host: HostProcess) -> httpx.Client:
    assert host.dev_key
    return host.http(host.dev_key)


def start(a: httpx.Client, workflow_id: str, inputs: Doc) -> str:
    response = a.post("/v1/runs", json={"workflowId": workflow_id, "inputs": inputs})
    assert response.status_code == 201, response.text
    run_id: str = response.json()["runId"]
    return run_id


def test_an_echo_completes_with_the_peers_artifact_marked_untrusted(
    a: httpx.Client, peer: tuple[str, Path], peer_kind: str
) -> None:
    run_id = start(a, "hand-sdk", {"prompt": "hello from Tether"})
    done = until_status(a, run_id, "completed", "failed")
    assert done["status"] == "completed", done
    outputs = outputs_of(done)
    assert outputs["state"] == "completed" and outputs["contentTrust"] == "untrusted"
    [artifact] = outputs["artifacts"]
    assert artifact["contentTrust"] == "untrusted" and artifact["source"]["agent"] == peer[0]
    assert [p["text"] for p in artifact["parts"] if p.get("kind") == "text"] == ["hello from Tether"]
    assert done["nodeStates"]["peer"]["handoff"]["version"] == PEER_KINDS[peer_kind][2]  # the one its card offers
    assert_clean(a, run_id)


def test_the_peers_question_is_asked_on_a_and_the_answer_completes_both(a: httpx.Client) -> None:
    run_id = start(a, "hand-sdk", {"prompt": "input-required"})
    waiting = until_status(a, run_id, "waiting-input", "failed", "completed")
    assert waiting["status"] == "waiting-input", waiting
    data = waiting["interrupt"]["data"]
    assert data["contextType"] == "a2a-peer-input"
    [question] = data["questions"]
    assert question["question"] == "Which colour should it be?"
    answer = {"resumeValue": {"answers": {question["id"]: "teal"}}}
    assert a.post(f"/v1/runs/{run_id}/interrupts/peer", json=answer).status_code == 200
    done = until_status(a, run_id, "completed", "failed")
    assert done["status"] == "completed", done
    [artifact] = outputs_of(done)["artifacts"]
    assert "teal" in artifact["parts"][0]["text"], artifact  # the SDK peer got the answer and echoed it
    assert_clean(a, run_id)


TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$")


def received(peer_folder: Path, run_id: str, task_id: str) -> list[Doc]:
    """The JSON-RPC requests the peer received for one hand-off: its send (by run id), then those naming its task."""
    lines = [json.loads(line) for line in (peer_folder / "received.jsonl").read_text().splitlines()]
    mine = []
    for line in lines:
        params = line["body"]["params"]
        message = params.get("message") or {}
        sent_by = ((message.get("metadata") or {}).get("openwop") or {}).get("runId")
        if task_id in (params.get("id"), params.get("taskId"), message.get("taskId")) or sent_by == run_id:
            mine.append(line)
    return mine


def test_every_request_of_a_handoff_carries_one_trace(a: httpx.Client, peer_folder: Path, peer_kind: str) -> None:
    """A W3C traceparent on each of the hand-off's requests (send, reads, the reply): one trace id, a new span each."""
    first = start(a, "hand-sdk", {"prompt": "input-required"})
    waiting = until_status(a, first, "waiting-input", "failed", "completed")
    [question] = waiting["interrupt"]["data"]["questions"]
    assert a.post(f"/v1/runs/{first}/interrupts/peer", json={"resumeValue": {"answers": {question["id"]: "red"}}})
    done = until_status(a, first, "completed", "failed")
    assert done["status"] == "completed", done
    requests = received(peer_folder, first, outputs_of(done)["taskId"])
    methods = [r["body"]["method"] for r in requests]
    send, get = ("message/send", "tasks/get") if PEER_KINDS[peer_kind][2] == "0.3" else ("SendMessage", "GetTask")
    assert methods[0] == send and methods.count(send) == 2, methods  # the send, the reply
    assert get in methods, methods
    parsed = [TRACEPARENT.match(r["traceparent"] or "") for r in requests]
    assert all(parsed), [r["traceparent"] for r in requests]
    traces = {m.group(1) for m in parsed if m}
    assert len(traces) == 1 and traces != {"0" * 32}, traces
    spans = [m.group(2) for m in parsed if m]
    assert len(set(spans)) == len(spans) and "0" * 16 not in spans  # each request is a span of its own
    second = start(a, "hand-sdk", {"prompt": "another hand-off"})
    other = until_status(a, second, "completed", "failed")
    later = received(peer_folder, second, outputs_of(other)["taskId"])
    [again] = {m.group(1) for m in (TRACEPARENT.match(r["traceparent"] or "") for r in later) if m}
    assert again not in traces  # a trace per hand-off


def test_auth_required_waits_for_input_marked_auth(a: httpx.Client) -> None:
    run_id = start(a, "hand-sdk", {"prompt": "auth-required"})
    waiting = until_status(a, run_id, "waiting-input", "failed", "completed")
    assert waiting["status"] == "waiting-input", waiting
    assert waiting["interrupt"]["data"]["contextType"] == "auth"
    assert "Authorize the calendar" in waiting["interrupt"]["data"]["questions"][0]["question"]
    assert a.post(f"/v1/runs/{run_id}/cancel", json={"reason": "test over"}).status_code == 200
    assert until_status(a, run_id, "cancelled")["status"] == "cancelled"


def test_rejected_fails_the_node_rejected_by_remote(a: httpx.Client) -> None:
    run_id = start(a, "hand-sdk", {"prompt": "rejected"})
    failed = until_status(a, run_id, "failed", "completed")
    error = failed["nodeStates"]["peer"]["error"]
    assert error["code"] == "rejected_by_remote" and "I will not do that" in error["message"], error
    assert_clean(a, run_id)


def test_the_conformance_fixture_is_advertised_and_its_drift_legs_pass(a: httpx.Client) -> None:
    """What the suite's T2/T3 do (§14.6 of the host notes), against a peer that is not the suite's fake."""
    assert ROUNDTRIP in a.get("/.well-known/openwop").json()["fixtures"]
    auth = start(a, ROUNDTRIP, {"driftScenario": "auth-required"})
    assert until_status(a, auth, "waiting-input", "failed", "completed")["status"] == "waiting-input"  # drift #3
    a.post(f"/v1/runs/{auth}/cancel", json={"reason": "conformance-cleanup"})
    rejected = start(a, ROUNDTRIP, {"driftScenario": "rejected"})
    failed = until_status(a, rejected, "completed", "failed", "cancelled")  # drift #4
    assert failed["status"] == "failed" and failed["error"]["code"] == "rejected_by_remote", failed
    assert "rejected" in json.dumps(failed).lower()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_file_reaches_the_sdk_peer_in_its_version_and_its_echo_comes_back(
    a: httpx.Client, peer_folder: Path, peer_kind: str
) -> None:
    """The SDK's own server parses the file as its version writes it (0.3 bytes/mimeType/name, 1.0
    raw/mediaType/filename) and echoes it: A answers its client with it, byte for byte, marked untrusted."""
    asked = message("hello with a file", skill="hand-sdk-file")
    encoded = base64.b64encode(SENT).decode()
    asked["parts"] += [
        {"kind": "file", "file": {"bytes": encoded, "name": "q3.bin", "mimeType": "application/octet-stream"}},
        {"kind": "file", "file": {"uri": URI, "name": "signed.pdf", "mimeType": "application/pdf"}},
    ]
    task_id = send(a, asked, blocking=False)["id"]
    done = wait_state(a, task_id, "completed", "failed", timeout=30)
    assert done["status"]["state"] == "completed", done
    b_task = outputs_of(run(a, task_id))["taskId"]
    [sent] = [
        r for r in received(peer_folder, task_id, b_task) if r["body"]["method"] in ("message/send", "SendMessage")
    ]
    parts = sent["body"]["params"]["message"]["parts"]
    if PEER_KINDS[peer_kind][2] == "0.3":
        assert parts[1] == {
            "kind": "file",
            "file": {"bytes": encoded, "name": "q3.bin", "mimeType": "application/octet-stream"},
        }
        assert parts[2] == {"kind": "file", "file": {"uri": URI, "name": "signed.pdf", "mimeType": "application/pdf"}}
    else:
        assert parts[1] == {"raw": encoded, "filename": "q3.bin", "mediaType": "application/octet-stream"}
        assert parts[2] == {"url": URI, "filename": "signed.pdf", "mediaType": "application/pdf"}
    [artifact] = get_task(a, task_id)["artifacts"]
    echoed = artifact["parts"]
    assert [p["kind"] for p in echoed] == ["text", "file", "file"], echoed
    assert all(p["metadata"]["contentTrust"] == "untrusted" for p in echoed)
    assert sha(base64.b64decode(echoed[1]["file"]["bytes"], validate=True)) == sha(SENT)
    assert echoed[2]["file"] == {"uri": URI, "name": "signed.pdf", "mimeType": "application/pdf"}
    assert encoded not in json.dumps(events(a, task_id))
    assert_clean(a, task_id)


def test_the_peers_question_comes_with_its_file_kept_here(a: httpx.Client, peer: tuple[str, Path]) -> None:
    run_id = start(a, "hand-sdk", {"prompt": "input-required-file"})
    waiting = until_status(a, run_id, "waiting-input", "failed", "completed")
    assert waiting["status"] == "waiting-input", waiting
    asked = waiting["interrupt"]["peerQuestion"]
    assert asked["message"] == "Which colour should it be?" and asked["contentTrust"] == "untrusted"
    [draft] = asked["files"]
    digest = f"sha256:{sha(DRAFT)}"
    assert draft["file"] == {
        "blob": digest,
        "size": len(DRAFT),
        "name": "draft.bin",
        "mimeType": "application/octet-stream",
    }
    assert draft["metadata"]["contentTrust"] == "untrusted" and draft["metadata"]["source"]["agent"] == peer[0]
    download = a.get(f"/v1/runs/{run_id}/files/{digest}")
    assert download.status_code == 200 and sha(download.content) == sha(DRAFT)
    assert base64.b64encode(DRAFT).decode() not in json.dumps(events(a, run_id))
    [question] = waiting["interrupt"]["data"]["questions"]
    assert a.post(f"/v1/runs/{run_id}/interrupts/peer", json={"resumeValue": {"answers": {question["id"]: "teal"}}})
    assert until_status(a, run_id, "completed", "failed")["status"] == "completed"
    assert_clean(a, run_id)
