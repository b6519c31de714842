"""The v2 conformance seams, against the shapes their scenarios assert: mounted only on request, on both stores.

The era-2 seed is driven as ``v2-v1-events-translated``, ``v2-unmapped-type-refused`` and
``v2-fork-a-v1-run`` drive it (their v1 logs, rebuilt here from the scenarios' text); the
webhook receiver as ``v2-v1-signed-webhook-accepted`` does (an ``X-openwop-*``-only
delivery signed by hand, then the same with one signature digit changed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from typing import Any

import httpx
import pytest
from backends import suite_host
from harness import Host
from keys import made_key
from schemas import openwop_validator
from v2_wire import project, refused, wait_status

SEAMS = "/conformance/seams/sample"
SEED = f"{SEAMS}/event-log/seed"
RECEIVE = f"{SEAMS}/webhooks/receive"
PROFILE = "openwop-conformance-seams-v2"
V2 = {"OpenWOP-Version": "2.0"}
#: ``ids.schema.json`` ``runId``, from the schema's text (not Tether's code)
BOUND_RUN_ID = re.compile(r"^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$")
#: the codemap rows the scenarios' logs use (``event-codemap.json``)
RENAMES = {"agent.toolCalled": "agent.tool-called", "agent.toolReturned": "agent.tool-returned"}


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str) -> Host:
    return suite_host(request, "--enable-test-seams")


def stamp(i: int) -> str:
    return f"2026-01-15T10:00:0{i}.000Z"


def v1_log(workflow: str = "conformance-noop") -> list[dict[str, Any]]:
    """The scenarios' era-2 log: run.started without an owner, two renamed rows, run.completed."""
    call = {"agentId": "conformance-agent", "toolName": "echo", "callId": "call-0001"}
    return [
        {"type": "run.started", "sequence": 0, "payload": {"workflowId": workflow}, "timestamp": stamp(0)},
        {"type": "agent.toolCalled", "sequence": 1, "payload": call, "timestamp": stamp(1)},
        {"type": "agent.toolReturned", "sequence": 2, "payload": {**call, "status": "ok"}, "timestamp": stamp(2)},
        {"type": "run.completed", "sequence": 3, "payload": {"durationMs": 3000}, "timestamp": stamp(3)},
    ]


def seed(http: httpx.Client, events: list[dict[str, Any]], status: str = "completed") -> str:
    answer = http.post(SEED, json={"eventLogSchemaVersion": 2, "status": status, "events": events})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert list(body) == ["runId"] and BOUND_RUN_ID.match(body["runId"]), body
    run_id: str = body["runId"]
    return run_id


def sse_events(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    events = []
    with http.stream("GET", f"/runs/{project(run_id)}/events", params={"streamMode": "debug"}) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
    return events


def test_a_seeded_era_2_log_reads_translated_by_poll_and_sse(http: httpx.Client) -> None:
    log = v1_log()
    run_id = seed(http, log)
    poll = http.get(f"/runs/{project(run_id)}/events/poll", params={"timeout": 1})
    assert poll.status_code == 200, poll.text
    event_doc = openwop_validator("v2/run-event")
    for reader, events in (("poll", poll.json()["events"]), ("sse", sse_events(http, run_id))):
        assert [e["sequence"] for e in events] == [0, 1, 2, 3], reader
        for seeded, read in zip(log, events, strict=True):
            event_doc.validate(read)
            assert read["type"] == RENAMES.get(seeded["type"], seeded["type"]), reader
            assert read["timestamp"] == seeded["timestamp"] and read["runId"] == run_id
        assert events[1]["payload"] == log[1]["payload"], "a payload with no projection passes through"
        subject = events[0]["payload"]["owner"]["subject"]
        assert subject["issuer"] == "urn:openwop:legacy", "the parent had no owner: the legacy stamp, at read"
    snapshot = http.get(f"/runs/{project(run_id)}").json()
    openwop_validator("v2/run-snapshot").validate(snapshot)
    assert snapshot["eventLogSchemaVersion"] == 2 and snapshot["status"] == "completed", "no era stamp was written"
    v1 = http.get(
        f"/v1/runs/{run_id.split('/')[1]}/events/poll", params={"timeout": 0}, headers={"OpenWOP-Version": "1"}
    )
    assert [e["type"] for e in v1.json()["events"]] == [e["type"] for e in log], "stored as given, in v1 spelling"


def test_an_unmapped_type_makes_the_read_refuse_and_a_registered_vendor_type_reads_as_it_is(
    http: httpx.Client,
) -> None:
    def with_row(kind: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
        log = v1_log()
        log[1:3] = [{"type": kind, "sequence": 1, "payload": payload, "timestamp": stamp(1)}]
        log[-1]["sequence"] = 2
        return log

    unmapped = seed(http, with_row("foo.bar", {}))
    body = refused(
        http.get(f"/runs/{project(unmapped)}/events/poll", params={"timeout": 1}), 500, "event_type_unmapped"
    )
    assert body["details"]["type"] == "foo.bar" and body.get("retriable") is not True
    # the control: ``example`` is the one org the vendor registry holds, so its type passes through unchanged
    vendor = seed(http, with_row("example.thing-happened", {"marker": "era2-vendor-passthrough"}))
    events = http.get(f"/runs/{project(vendor)}/events/poll", params={"timeout": 1}).json()["events"]
    assert events[1]["type"] == "example.thing-happened" and events[1]["payload"] == {
        "marker": "era2-vendor-passthrough"
    }


def test_a_running_seed_is_a_run_the_engine_drives(http: httpx.Client) -> None:
    started = {"type": "run.started", "sequence": 0, "payload": {"workflowId": "echo", "inputs": {"prompt": "hi"}}}
    run_id = seed(http, [started], status="running")
    done = wait_status(http, run_id, "completed", "failed")
    assert done["status"] == "completed" and done["eventLogSchemaVersion"] == 2, done
    types = [
        e["type"] for e in http.get(f"/runs/{project(run_id)}/events/poll", params={"timeout": 0}).json()["events"]
    ]
    assert types[0] == "run.started" and types[-1] == "run.completed" and len(types) > 2


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda b: b.update(eventLogSchemaVersion=3), "eventLogSchemaVersion"),
        (lambda b: b.update(status="paused"), "status"),
        (lambda b: b.update(extra=True), "extra"),
        (lambda b: b.update(events=[]), "events"),
        (lambda b: b["events"][1].update(sequence=7), "sequence 7"),
        (lambda b: b["events"][1].update(note="x"), "note"),
        (lambda b: b["events"][1].update(payload=[1]), "payload"),
        (lambda b: b["events"][2].update(timestamp="yesterday"), "timestamp"),
        (lambda b: b["events"][2].update(causationId="short"), "causationId"),
        (lambda b: b["events"][0].update(type="run.resumed"), "run.started"),
        (lambda b: b["events"][0]["payload"].pop("workflowId"), "workflowId"),
        (lambda b: b["events"][2].update(type="run.started"), "starts once"),
        (lambda b: b["events"][0]["payload"].update(subject={"issuer": "urn:x"}), "subject"),
        (lambda b: b["events"][2].update(type="run.failed"), "terminal"),
        (lambda b: b.update(status="failed"), "run.failed"),
        (lambda b: b.update(status="running"), "no terminal event"),
        (lambda b: b["events"][1].update(type="interrupt.requested", payload={}), "fold"),
    ],
)
def test_a_seed_that_is_no_v1_log_is_refused_and_writes_nothing(http: httpx.Client, change: Any, says: str) -> None:
    body: dict[str, Any] = {"eventLogSchemaVersion": 2, "status": "completed", "events": v1_log()}
    change(body)
    before = http.get("/runs", params={"limit": 100}).json()
    answer = http.post(SEED, json=body)
    assert answer.status_code == 400, answer.text
    envelope = answer.json()
    openwop_validator("v2/error-envelope").validate(envelope)
    assert envelope["error"] == "validation_error" and says in json.dumps(envelope), envelope
    assert http.get("/runs", params={"limit": 100}).json() == before


def delivery(secret: str, body: str, *, tamper: bool = False) -> dict[str, str]:
    """An X-openwop-*-only scheme-v1 delivery, signed from the scheme's definition (not Tether's signer)."""
    timestamp = str(int(time.time()))
    digest = hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
    if tamper:
        digest = ("1" if digest[0] == "0" else "0") + digest[1:]
    return {
        "X-openwop-Webhook-Id": "wh-conformance-v1-signed",
        "X-openwop-Event-Type": "run.completed",
        "X-openwop-Timestamp": timestamp,
        "X-openwop-Signature": f"sha256={digest}",
        "X-openwop-Signature-Algorithm": "v1",
    }


def test_the_receiver_accepts_a_v1_signed_delivery_and_refuses_a_tampered_one(http: httpx.Client) -> None:
    secret = f"conformance-secret-{time.time_ns()}"
    body = json.dumps({"runId": "run-conformance-v1-signed", "event": {"type": "run.completed", "sequence": 3}})
    good = http.post(RECEIVE, json={"secret": secret, "headers": delivery(secret, body), "body": body})
    assert good.status_code == 200 and good.json() == {"accepted": True}, good.text
    bad = http.post(RECEIVE, json={"secret": secret, "headers": delivery(secret, body, tamper=True), "body": body})
    assert bad.status_code == 200, bad.text
    assert bad.json()["accepted"] is False and "X-openwop-Signature" in bad.json()["reason"]
    for malformed in ({"secret": secret, "headers": {}}, {"secret": "", "headers": {}, "body": ""}, {"x": 1}):
        assert http.post(RECEIVE, json=malformed).status_code == 400, malformed


def test_the_a2a_task_read_serves_the_v2_record(http: httpx.Client, host: Host) -> None:
    started = http.post(f"{SEAMS}/a2a/tasks/start", json={})
    assert started.status_code == 201, started.text
    task_id = started.json()["taskId"]
    for named in (task_id, f"default%2F{task_id}", f"default~2F{task_id}"):
        answer = http.get(f"{SEAMS}/a2a/tasks/{named}")
        assert answer.status_code == 200, answer.text
        record = answer.json()
        openwop_validator("v2/a2a-task-state").validate(record)
        assert record["runId"] == f"default/{task_id}" and record["state"] == "input-required", record
    foreign = host.http(made_key(host, "other", "--tenant", "acme"))
    assert foreign.get(f"{SEAMS}/a2a/tasks/{task_id}").status_code == 404
    assert http.get(f"{SEAMS}/a2a/tasks/acme%2F{task_id}").status_code == 404


def test_discovery_names_the_seams_profile_exactly_when_they_are_mounted(
    request: pytest.FixtureRequest, host: Host
) -> None:
    plain = suite_host(request)
    validator = openwop_validator("v2/capabilities")
    for served, seams in ((host, True), (plain, False)):
        with served.client() as anonymous:
            root = anonymous.get("/.well-known/openwop", headers=V2).json()
            openapi = anonymous.get("/openapi.json", headers=V2).json()
            seeded = served.http(served.dev_key).post(SEED, json={})
        validator.validate(root)
        assert root.get("conformance") == ({"seamsProfile": PROFILE} if seams else None), root.get("conformance")
        assert not [path for path in openapi["paths"] if path.startswith("/conformance")]
        assert seeded.status_code == (400 if seams else 404), seeded.text
