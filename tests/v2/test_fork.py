"""Forks at major 2 (``POST /runs/{runId}:fork``, ``GET /runs/{runId}/ancestry``) on an in-process host, both stores.

What ``v2-run-fork-refusals``, ``v2-fork-a-v1-run`` and ``v2-run-fork-ancestry`` assert,
and more: the prefix a fork inherits reads byte-for-byte as its source's does at v2 (type,
sequence, payload); a replay answers a gate from the source's recorded resolution and asks
nobody; a branch goes on from ``fromSeq`` with its overlay; a replay delivers no webhook of
its copied or re-executed events; every refusal writes nothing. The two-host hand-off
replay is in ``tests/a2a/test_a2a_handoff_replay.py``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import trustme
from backends import suite_host
from harness import Host, HostProcess, wait_until
from keys import made_key
from receiver import Receiver, egress_to
from schemas import openwop_validator
from workflow_docs import node, workflow_doc

GATED = workflow_doc(
    "fork-gated",
    [node("gate", "core.approvalGate", config={"title": "Go on?"}), node("after", "core.identity")],
    [{"id": "e1", "sourceNodeId": "gate", "targetNodeId": "after"}],
)
SLOW = workflow_doc(
    "fork-slow",
    [
        node("gate", "core.approvalGate", config={"title": "Go on?"}),
        node("wait", "core.delay", config={"delayMs": 1500}),
        node("after"),
    ],
    [
        {"id": "e1", "sourceNodeId": "gate", "targetNodeId": "wait"},
        {"id": "e2", "sourceNodeId": "wait", "targetNodeId": "after"},
    ],
)
Doc = dict[str, Any]


@pytest.fixture(scope="module")
def rx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    receiver = Receiver(trustme.CA(), tmp_path_factory.mktemp("fork-receiver"))
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def workflows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fork-workflows")
    for doc in (GATED, SLOW):
        (folder / f"{doc['id']}.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str, workflows: Path, rx: Receiver) -> Host:
    return suite_host(request, "--workflows", str(workflows), "--enable-test-seams", *egress_to(rx))


def _path(bound: str) -> str:
    """RFC 0184's path form of a bound id (bytes outside A-Za-z0-9._- as ~HH), written from its definition."""
    kept = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    return "".join(chr(b) if b in kept else f"~{b:02X}" for b in bound.encode())


def _refused(response: httpx.Response, status: int, code: str) -> Doc:
    assert response.status_code == status, f"expected {status} {code}, got {response.status_code}: {response.text}"
    body: Doc = response.json()
    assert body["error"] == code, body
    return body


def _settled(http: httpx.Client, run_id: str, *statuses: str) -> Doc:
    def read() -> Doc | None:
        snapshot: Doc = http.get(f"/runs/{_path(run_id)}").json()
        return snapshot if snapshot["status"] in statuses else None

    found: Doc = wait_until(read, timeout=15, interval=0.02, what=f"run {run_id} to be {statuses}")
    return found


def _created(http: httpx.Client, workflow: str, **inputs: Any) -> str:
    answer = http.post("/runs", json={"workflowId": workflow, "inputs": inputs})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["runId"]
    return run_id


def _events(http: httpx.Client, run_id: str) -> list[Doc]:
    answer = http.get(f"/runs/{_path(run_id)}/events/poll", params={"timeout": 0})
    assert answer.status_code == 200, answer.text
    found: list[Doc] = answer.json()["events"]
    return found


def _observable(event: Doc) -> tuple[str, int, bytes]:
    return event["type"], event["sequence"], orjson.dumps(event["payload"], option=orjson.OPT_SORT_KEYS)


def _fork(http: httpx.Client, run_id: str, **body: Any) -> httpx.Response:
    return http.post(f"/runs/{_path(run_id)}:fork", json=body)


def _forked(http: httpx.Client, run_id: str, **body: Any) -> Doc:
    answer = _fork(http, run_id, **body)
    assert answer.status_code == 201, answer.text
    made: Doc = answer.json()
    assert made["sourceRunId"] == run_id and made["mode"] == body["mode"], made
    assert made["runId"].startswith("default/run_") and made["runId"] != run_id
    assert made["eventsUrl"].endswith(f"/runs/{_path(made['runId'])}/events"), made
    return made


def _run_count(http: httpx.Client) -> int:
    return len(http.get("/runs", params={"limit": 100}).json()["runs"])


def _approved(http: httpx.Client, workflow: str = "fork-gated") -> str:
    """A finished run of ``workflow`` whose gate a person approved."""
    run_id = _created(http, workflow, topic="forks")
    _settled(http, run_id, "waiting-approval")
    answer = http.post(f"/runs/{_path(run_id)}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
    assert answer.status_code in (200, 202), answer.text
    _settled(http, run_id, "completed")
    return run_id


def test_a_replay_from_0_re_executes_the_run_and_answers_its_gate_from_the_record(http: httpx.Client) -> None:
    """Nobody is asked again: the fork's log says what the source's did, event for event, and it ends the same."""
    source = _approved(http)
    made = _forked(http, source, mode="replay")
    assert made["fromSeq"] == 0
    fork = _settled(http, made["runId"], "completed")
    parent = http.get(f"/runs/{_path(source)}").json()
    assert fork["owner"] == parent["owner"], "the owner is copied verbatim"
    assert fork["variables"] == parent["variables"] and fork["nodeStates"]["after"]["status"] == "completed"
    assert fork["extensions"]["tether.fork"] == {"sourceRunId": source, "mode": "replay", "fromSeq": 0}
    assert "tether.interrupt" not in fork.get("extensions", {}), "the gate was never open on the fork"
    ours, theirs = _events(http, made["runId"]), _events(http, source)
    assert [_observable(e)[:2] for e in ours] == [_observable(e)[:2] for e in theirs]
    differs = {"durationMs"}  # clock fields: the replay takes its own time
    for mine, its in zip(ours, theirs, strict=True):
        same = {k: v for k, v in mine["payload"].items() if k not in differs}
        assert same == {k: v for k, v in its["payload"].items() if k not in differs}, (mine, its)
    assert {e["eventId"] for e in ours}.isdisjoint(e["eventId"] for e in theirs), "fresh event ids"
    assert all(e["runId"] == made["runId"] for e in ours)


def test_the_inherited_prefix_reads_as_the_source_reads_at_v2(http: httpx.Client) -> None:
    """``fromSeq`` = the terminal event: everything below it is fixed history, byte-equal; then the run ends again."""
    source = _approved(http)
    theirs = _events(http, source)
    last = theirs[-1]["sequence"]
    made = _forked(http, source, mode="replay", fromSeq=last)
    assert made["fromSeq"] == last
    _settled(http, made["runId"], "completed")
    ours = _events(http, made["runId"])
    assert [_observable(e) for e in ours[:last]] == [_observable(e) for e in theirs[:last]]
    assert ours[last]["type"] == "run.completed" and len(ours) == last + 1


def test_a_branch_goes_on_from_its_fork_point_as_a_new_run_with_its_overlay(http: httpx.Client) -> None:
    """Forked at the gate's question, the branch waits at it anew: a person answers the branch, not the source."""
    source = _approved(http)
    theirs = _events(http, source)
    asked = next(e["sequence"] for e in theirs if e["type"] == "interrupt.resolved")
    overlay = {"tags": ["branched"], "metadata": {"why": "try reject"}}
    made = _forked(http, source, mode="branch", fromSeq=asked, runOptionsOverlay=overlay)
    waiting = _settled(http, made["runId"], "waiting-approval")
    assert waiting["tags"] == ["branched"] and waiting["metadata"] == {"why": "try reject"}
    answer = http.post(f"/runs/{_path(made['runId'])}/interrupts/gate", json={"resumeValue": {"action": "reject"}})
    assert answer.status_code in (200, 202), answer.text
    branched = _settled(http, made["runId"], "completed", "failed")
    assert branched["nodeStates"]["gate"]["status"] != "completed" or branched["nodeStates"].get("after") is None
    assert http.get(f"/runs/{_path(source)}").json()["status"] == "completed", "the source is untouched"
    assert [_observable(e) for e in _events(http, made["runId"])[:asked]] == [_observable(e) for e in theirs[:asked]]


def test_a_fork_of_a_seeded_era_2_run_inherits_its_translated_prefix(http: httpx.Client) -> None:
    """``v2-fork-a-v1-run`` through the era-2 seed seam: the prefix reads as the parent does, legacy subject too."""
    call = {"agentId": "conformance-agent", "toolName": "echo", "callId": "call-0001"}
    log = [
        {"type": "run.started", "sequence": 0, "payload": {"workflowId": "conformance-noop"}},
        {"type": "agent.toolCalled", "sequence": 1, "payload": call},
        {"type": "agent.toolReturned", "sequence": 2, "payload": {**call, "status": "ok"}},
        {"type": "run.completed", "sequence": 3, "payload": {"durationMs": 3000}},
    ]
    for i, event in enumerate(log):
        event["timestamp"] = f"2026-01-15T10:00:0{i}.000Z"
    seeded = http.post(
        "/conformance/seams/sample/event-log/seed",
        json={"eventLogSchemaVersion": 2, "status": "completed", "events": log},
    )
    assert seeded.status_code == 201, seeded.text
    parent_id = seeded.json()["runId"]
    made = _forked(http, parent_id, mode="replay", fromSeq=3)
    _settled(http, made["runId"], "completed", "failed")
    parent, fork = _events(http, parent_id), _events(http, made["runId"])
    assert [_observable(e) for e in fork[:3]] == [_observable(e) for e in parent[:3]]
    assert [e["type"] for e in fork[:3]] == ["run.started", "agent.tool-called", "agent.tool-returned"]
    for started in (parent[0], fork[0]):
        assert started["payload"]["owner"]["subject"]["issuer"] == "urn:openwop:legacy", started


def test_refusals_name_the_problem_and_write_nothing(host: Host, http: httpx.Client) -> None:
    source = _approved(http)
    before = _run_count(http)
    _refused(_fork(http, source, mode="replay", runOptionsOverlay={"tags": ["x"]}), 400, "validation_error")
    _refused(_fork(http, source, mode="branch"), 400, "validation_error")
    _refused(_fork(http, source, mode="rewind"), 400, "validation_error")
    _refused(_fork(http, source, mode="replay", fromSeq=-1), 400, "validation_error")
    _refused(_fork(http, source, mode="replay", extra=True), 400, "validation_error")
    far = _refused(_fork(http, source, mode="branch", fromSeq=999_999), 422, "fork_point_invalid")
    assert far["details"]["lastSequence"] == len(_events(http, source)) - 1, far
    _refused(_fork(http, "default/run_0123456789abcdef0123456789abcdef", mode="replay"), 404, "not_found")
    other = made_key(host, "fork-other", "--tenant", "acme")
    with host.http(other) as foreign:
        foreign.headers["OpenWOP-Version"] = "2.0"
        _refused(foreign.post(f"/runs/{source.partition('/')[2]}:fork", json={"mode": "replay"}), 404, "not_found")
        _refused(foreign.post(f"/runs/{_path(source)}:fork", json={"mode": "replay"}), 403, "id_tenant_mismatch")
    assert _run_count(http) == before, "no refused fork made a run"


def test_ancestry_parent_is_null_for_a_run_and_for_its_fork(http: httpx.Client) -> None:
    """A fork is not dispatched by its source: its lineage is ``sourceRunId``, its ancestry parent null."""
    source = _approved(http)
    made = _forked(http, source, mode="branch", fromSeq=0)
    for run_id in (source, made["runId"]):
        answer = http.get(f"/runs/{_path(run_id)}/ancestry")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["runId"] == run_id and body["parent"] is None and body["hostId"], body


def test_a_replay_of_a_run_whose_webhook_fired_delivers_nothing(http: httpx.Client, rx: Receiver) -> None:
    """Neither the copied history nor the re-executed events of a replay go out; a later run's do (the control)."""
    path = f"/fork-hook/{time.monotonic_ns()}"
    hook = http.post("/webhooks", json={"url": rx.url(path), "events": ["run.started", "run.completed"]})
    assert hook.status_code == 201, hook.text
    try:

        def arrived(run_id: str) -> list[Any]:
            opaque = run_id.partition("/")[2].encode()
            return [r for r in list(rx.requests) if r.path == path and opaque in r.body]

        source = _approved(http)
        wait_until(lambda: len(arrived(source)) >= 2, what="the source's two deliveries")
        made = _forked(http, source, mode="replay")
        _settled(http, made["runId"], "completed")
        control = _created(http, "echo", prompt="after the fork")
        wait_until(lambda: len(arrived(control)) >= 2, what="the control run's deliveries (the outbox works)")
        assert arrived(made["runId"]) == [], "a replay delivers nothing"
        assert len(arrived(source)) == 2, "nor does the source deliver again"
        # a branch delivers what it does itself (its run.completed), never what it copied (run.started)
        last = len(_events(http, source)) - 1
        branch = _forked(http, source, mode="branch", fromSeq=last)
        wait_until(lambda: arrived(branch["runId"]), what="the branch's own delivery")
        kinds = [orjson.loads(r.body)["event"]["type"] for r in arrived(branch["runId"])]
        assert kinds == ["run.completed"], kinds
    finally:
        http.delete(f"/webhooks/{_path(hook.json()['webhookId'])}")


def test_a_fork_reads_the_files_its_inherited_events_refer_to(host: Host, key: str, http: httpx.Client) -> None:
    """A run started over A2A with a file: the fork's log refers to the same blob, and the fork may read it."""
    data = f"a file for a fork {time.monotonic_ns()}".encode()
    file = {"bytes": base64.b64encode(data).decode(), "mimeType": "text/plain", "name": "a.txt"}
    message = {"role": "user", "parts": [{"kind": "file", "file": file}], "messageId": "m-fork", "kind": "message"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with host.client(key) as v1:
        task = v1.post("/v1/a2a", json=call).json()["result"]["id"]
        made = _forked(http, f"default/{task}", mode="replay")
        _settled(http, made["runId"], "completed")
        read = v1.get(f"/v1/runs/{made['runId'].partition('/')[2]}/files/{digest}")
    assert read.status_code == 200 and read.content == data, read.text


@pytest.mark.process
def test_an_acknowledged_fork_survives_sigkill_and_completes_once(host: Host, key: str) -> None:
    """The fork and its inherited events are on disk at the 201: killed while its delay sleeps, it goes on."""
    http = host.http(key)
    http.headers["OpenWOP-Version"] = "2.0"
    source = _approved(http, "fork-slow")
    made = _forked(http, source, mode="replay")
    path = f"/runs/{_path(made['runId'])}"
    wait_until(lambda: http.get(path).json()["nodeStates"].get("wait", {}).get("status") == "running", what="the delay")
    assert isinstance(host, HostProcess)
    host.restart()  # SIGKILL, then a new process on the same data
    http = host.http(key)
    http.headers["OpenWOP-Version"] = "2.0"
    done = _settled(http, made["runId"], "completed")
    assert done["nodeStates"]["gate"]["status"] == "completed" and done["nodeStates"]["after"]["status"] == "completed"
    kinds = [(e["type"], e.get("nodeId")) for e in _events(http, made["runId"])]
    assert kinds.count(("run.started", None)) == 1 and kinds.count(("node.started", "wait")) == 1, kinds
    assert kinds.count(("interrupt.requested", "gate")) == 1, "the recorded question, once; nobody asked again"


def test_a_replay_forked_while_its_gate_waited_takes_the_recorded_answer(http: httpx.Client) -> None:
    """Forked between the question and its answer: the replay does not wait for anyone, it writes the answer."""
    source = _approved(http)
    answered = next(e["sequence"] for e in _events(http, source) if e["type"] == "interrupt.resolved")
    made = _forked(http, source, mode="replay", fromSeq=answered)
    _settled(http, made["runId"], "completed")
    ours, theirs = _events(http, made["runId"]), _events(http, source)
    assert [e["type"] for e in ours] == [e["type"] for e in theirs]
    assert ours[answered]["payload"] == theirs[answered]["payload"], "who decided what, as recorded"


def test_a_repeated_idempotency_key_answers_the_first_fork_again(http: httpx.Client) -> None:
    source = _approved(http)
    key = f"fork-key-{time.monotonic_ns()}-abcdefghij"
    first = http.post(f"/runs/{_path(source)}:fork", json={"mode": "replay"}, headers={"Idempotency-Key": key})
    again = http.post(f"/runs/{_path(source)}:fork", json={"mode": "replay"}, headers={"Idempotency-Key": key})
    assert first.status_code == again.status_code == 201, (first.text, again.text)
    assert again.json() == first.json() and again.headers["openwop-idempotent-replay"] == "true"
    other = http.post(
        f"/runs/{_path(source)}:fork", json={"mode": "branch", "fromSeq": 0}, headers={"Idempotency-Key": key}
    )
    _refused(other, 409, "idempotency_key_mismatch")


def test_the_replay_family_is_its_facets() -> None:
    from tether.openwop.v2 import fork
    from tether.settings import Settings

    class _Rest:
        settings = Settings(task_retention=3 * 86400)

    record = fork.replay_family(_Rest())  # type: ignore[arg-type]
    assert record == {
        "status": "experimental",
        "since": "2.0",
        "until": "2.1",
        "witness": "witnessable-gated",
        "modes": ["replay", "branch"],
        "effectSeamsManifest": "/host/effect-seams",
        "retention": {"days": 3},
    }


def test_the_v2_root_advertises_replay_and_serves_what_it_names(http: httpx.Client) -> None:
    """The record validates with the whole root, and its manifest path answers with the manifest."""
    root = http.get("/.well-known/openwop", headers={"OpenWOP-Version": "2"}).json()
    assert root["replay"]["modes"] == ["replay", "branch"]
    openwop_validator("v2/capabilities").validate(root)
    seams = http.get(root["replay"]["effectSeamsManifest"], headers={"OpenWOP-Version": "2"})
    assert seams.status_code == 200 and seams.json()["manifestVersion"] == "1"
