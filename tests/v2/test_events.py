"""A run's events at major 2: the closed poll, the SSE stream, every event a valid v2 RunEventDoc.

Every event (envelope and payload) is held to the official v2 schemas: ``run-event`` and the
payload definition its type names in ``run-event-payloads``'s normative ``_typeIndex``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from harness import Host
from schemas import openwop_validator
from v2_wire import create, project, refused, wait_status


def check_event(event: dict[str, Any]) -> None:
    """One v2 event: its envelope and its payload, against the official schemas."""
    openwop_validator("v2/run-event").validate(event)
    openwop_validator(f"v2/run-event-payloads#/_typeIndex/properties/{event['type']}").validate(event["payload"])


def poll(http: httpx.Client, run_id: str, **params: Any) -> dict[str, Any]:
    answer = http.get(f"/runs/{project(run_id)}/events/poll", params={"timeout": 1, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def frames(http: httpx.Client, run_id: str, query: str = "streamMode=debug", **headers: str) -> list[dict[str, Any]]:
    """The stream's frames as ``{id, event, data}``, read until the server closes it."""
    found: list[dict[str, Any]] = []
    with http.stream(
        "GET", f"/runs/{project(run_id)}/events?{query}", headers={"Accept": "text/event-stream", **headers}, timeout=10
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, Any] = {}
        for line in response.iter_lines():
            if not line:
                if "data" in fields:
                    found.append(fields)
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
    return found


def test_the_poll_is_closed_starts_at_0_and_its_cursor_is_exclusive(http: httpx.Client) -> None:
    run_id = create(http)["runId"]
    wait_status(http, run_id, "completed")
    page = poll(http, run_id)
    assert sorted(page) == ["events", "isTerminal", "lastSequence", "runId", "status"]
    assert page["runId"] == run_id and page["status"] == "completed" and page["isTerminal"] is True
    sequences = [e["sequence"] for e in page["events"]]
    assert sequences[0] == 0 and sequences == sorted(sequences) and sequences[-1] == page["lastSequence"]
    for event in page["events"]:
        check_event(event)
        assert event["runId"] == run_id and isinstance(event["engineVersion"], int)
    completed = page["events"][-1]
    assert completed["type"] == "run.completed" and completed["payload"]["outputs"] == {"payload": "hi"}
    after = poll(http, run_id, afterSequence=sequences[0])["events"]
    assert after == page["events"][1:]
    assert poll(http, run_id, afterSequence=page["lastSequence"] + 1000)["events"] == []
    refused(http.get(f"/runs/{project(run_id)}/events/poll", params={"afterSequence": "x"}), 400, "validation_error")


def test_a_page_that_says_terminal_holds_the_terminal_event(http: httpx.Client) -> None:
    """A reader that follows a live run page by page and stops at ``isTerminal`` has every event.

    The run's status and the events are two reads; a page must never pair a terminal status
    with events read before the run ended (seen once in CI: ``[run.started]`` and
    ``isTerminal: true``, so the reader stopped three events short).
    """
    for _ in range(20):
        run_id = create(http)["runId"]
        events: list[dict[str, Any]] = []
        after = -1
        for _ in range(50):
            page = poll(http, run_id, afterSequence=after, timeout=5)
            events += page["events"]
            after = events[-1]["sequence"] if events else after
            assert page["lastSequence"] >= after, page
            if page["isTerminal"]:
                break
        assert [e["sequence"] for e in events] == list(range(len(events))), "from 0, no gap, no repeat"
        assert events[-1]["type"] == "run.completed", [e["type"] for e in events]


def test_an_approval_cycle_reads_as_valid_v2_events_from_any_cursor(http: httpx.Client) -> None:
    run_id = create(http, "approval-gated")["runId"]
    snapshot = wait_status(http, run_id, "waiting-approval")
    node = snapshot["currentNodeId"]
    answer = http.post(f"/runs/{project(run_id)}/interrupts/{node}", json={"resumeValue": {"action": "accept"}})
    assert answer.status_code == 200 and answer.json() == {
        "runId": run_id,
        "nodeId": node,
        "status": answer.json()["status"],
    }
    wait_status(http, run_id, "completed")
    events = poll(http, run_id)["events"]
    types = [e["type"] for e in events]
    for wanted in (
        "node.suspended",
        "interrupt.requested",
        "approval.requested",
        "interrupt.resolved",
        "approval.received",
    ):
        assert wanted in types, types
    for event in events:
        check_event(event)
    suspended = events[types.index("node.suspended")]["payload"]
    assert suspended["interruptId"].startswith("default/int_")
    received = events[types.index("approval.received")]
    assert received["payload"]["interruptId"] == suspended["interruptId"]
    assert received["payload"]["action"] == "accept" and received["payload"]["decision"] == "granted"
    requested = events[types.index("approval.requested")]["payload"]
    assert (
        requested["kind"] == "approval" and requested["key"] == events[types.index("node.suspended")]["payload"]["key"]
    )
    # a reader that starts right at a legacy event still names its interrupt
    for name in ("approval.requested", "approval.received"):
        at = events[types.index(name)]["sequence"]
        resumed = poll(http, run_id, afterSequence=at - 1)["events"]
        assert resumed[0] == events[types.index(name)]


def test_a_clarification_answer_reads_as_a_resolved_interrupt(http: httpx.Client) -> None:
    run_id = http.post("/runs", json={"workflowId": "clarification-gated", "inputs": {}}).json()["runId"]
    snapshot = wait_status(http, run_id, "waiting-input")
    pending = snapshot["extensions"]["tether.interrupt"]
    answers = {q["id"]: "blue" for q in pending["data"]["questions"]}
    resolved = http.post(
        f"/runs/{project(run_id)}/interrupts/{pending['nodeId']}", json={"resumeValue": {"answers": answers}}
    )
    assert resolved.status_code == 200, resolved.text
    events = poll(http, run_id)["events"]
    for event in events:
        check_event(event)
    (clarified,) = [e for e in events if e["type"] == "clarification.resolved"]
    assert clarified["payload"]["resumeValue"] == answers and clarified["payload"]["kind"] == "clarification"


def test_the_stream_numbers_frames_resumes_exclusively_and_closes(http: httpx.Client) -> None:
    run_id = create(http)["runId"]
    wait_status(http, run_id, "completed")
    full = frames(http, run_id)
    ids = [int(f["id"]) for f in full]
    assert ids == sorted(ids) and ids[0] == 0 and full[-1]["event"] == "run.completed"
    for frame in full:
        event = json.loads(frame["data"])
        check_event(event)
        assert frame["event"] == event["type"] and int(frame["id"]) == event["sequence"]
    resumed = frames(http, run_id, **{"Last-Event-ID": str(ids[0])})
    assert [int(f["id"]) for f in resumed] == ids[1:]
    assert frames(http, run_id, **{"Last-Event-ID": str(ids[-1])}) == []
    assert frames(http, run_id, **{"Last-Event-ID": str(ids[-1] + 1000)}) == []
    values = frames(http, run_id, "streamMode=values", **{"Last-Event-ID": str(ids[0])})
    assert values[0]["event"] == "state.snapshot"
    openwop_validator("v2/run-snapshot").validate(json.loads(values[0]["data"]))
    batched = frames(http, run_id, "streamMode=updates&bufferMs=200")
    assert batched and all(f["event"] == "batch" for f in batched)
    flat = [e["sequence"] for f in batched for e in json.loads(f["data"])]
    updates = [int(f["id"]) for f in frames(http, run_id, "streamMode=updates")]
    assert flat == updates


@pytest.mark.parametrize("mode", ["bogus", "updates,values", "values,debug", ""])
def test_an_unserved_stream_mode_is_refused_before_anything_is_streamed(http: httpx.Client, mode: str) -> None:
    run_id = create(http)["runId"]
    path = f"/runs/{project(run_id)}/events"
    for accept in ("text/event-stream", "application/json"):
        answer = http.get(path, params={"streamMode": mode}, headers={"Accept": accept})
        if mode == "":
            assert answer.status_code == 200
            continue
        error = refused(answer, 400, "unsupported_stream_mode")
        assert "updates" in error["details"]["supported"]


def test_a_last_event_id_is_read_only_once_the_run_may_be_read(http: httpx.Client, host: Host) -> None:
    run_id = create(http)["runId"]
    refused(http.get(f"/runs/{project(run_id)}/events", headers={"Last-Event-ID": "abc"}), 400, "validation_error")
    for missing in (f"default/run_{'0' * 32}", "acme/run_00000000000000000000000000000000"):
        plain = http.get(f"/runs/{project(missing)}/events")
        with_id = http.get(f"/runs/{project(missing)}/events", headers={"Last-Event-ID": "0"})
        bad_id = http.get(f"/runs/{project(missing)}/events", headers={"Last-Event-ID": "abc"})
        assert plain.status_code == with_id.status_code == bad_id.status_code != 200
        assert plain.json()["error"] == with_id.json()["error"] == bad_id.json()["error"]
