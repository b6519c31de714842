"""The SSE event stream of a real host: resume with ``Last-Event-ID``, many observers, modes.

Streams are read with plain httpx and parsed here, frame by frame, so the test sees the
wire exactly: ``id: <sequence>`` / ``event: <type>`` / ``data: <RunEventDoc>``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from harness import Host, wait_until
from schemas import openwop_validator

STREAM_TIMEOUT = 20.0
# The updates tier as the spec lists it (reference §3.6): everything else is debug-only.
SPEC_UPDATES = frozenset(
    {
        "run.started",
        "run.completed",
        "run.failed",
        "run.cancelled",
        "run.paused",
        "run.resumed",
        "node.completed",
        "node.failed",
        "node.skipped",
        "node.suspended",
        "node.dispatched",
        "approval.requested",
        "approval.received",
        "clarification.requested",
        "clarification.resolved",
        "interrupt.requested",
        "interrupt.resolved",
        "artifact.created",
        "run.annotated",
        "workspace.updated",
    }
)


@dataclass(frozen=True)
class Frame:
    id: str | None
    event: str | None
    data: str

    @property
    def doc(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.data)
        return value


def _frames(response: httpx.Response) -> Iterator[Frame]:
    """SSE frames as they arrive (comments skipped); ends when the server closes."""
    fields: dict[str, list[str]] = {}
    for line in response.iter_lines():
        if line == "":
            if fields:
                yield Frame(
                    fields.get("id", [None])[-1],
                    fields.get("event", [None])[-1],
                    "\n".join(fields.get("data", [])),
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
    assert not fields, f"stream ended inside a frame: {fields!r}"


@contextmanager
def _stream(
    host: Host, key: str, run_id: str, *, mode: str | None = "debug", last_event_id: str | None = None
) -> Iterator[httpx.Response]:
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    params = {"streamMode": mode} if mode is not None else {}
    with host.client(key) as http:
        with http.stream(
            "GET", f"/v1/runs/{run_id}/events", params=params, headers=headers, timeout=STREAM_TIMEOUT
        ) as response:
            yield response


def _read_all(host: Host, key: str, run_id: str, **kwargs: Any) -> list[Frame]:
    """Every frame of a stream that the server must close on its own (terminal run)."""
    with _stream(host, key, run_id, **kwargs) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(_frames(response))


def _read_until(host: Host, key: str, run_id: str, stop: Callable[[Frame], bool], **kwargs: Any) -> list[Frame]:
    """Frames up to and including the first one ``stop`` accepts; then drop the connection."""
    seen: list[Frame] = []
    with _stream(host, key, run_id, **kwargs) as response:
        assert response.status_code == 200
        for frame in _frames(response):
            seen.append(frame)
            if stop(frame):
                return seen
    raise AssertionError(f"stream closed before the expected frame; saw {[f.event for f in seen]}")


def _check_frames(frames: list[Frame], run_id: str) -> None:
    """Each frame is well formed: id = sequence, event = type, data = a valid RunEventDoc."""
    envelope = openwop_validator("run-event")
    for frame in frames:
        doc = frame.doc
        envelope.validate(doc)
        openwop_validator(f"run-event-payloads#/$defs/_typeIndex/properties/{doc['type']}").validate(doc["payload"])
        assert doc["runId"] == run_id
        assert frame.id == str(doc["sequence"])
        assert frame.event == doc["type"]


def _create(host: Host, key: str, workflow: str, inputs: dict[str, Any] | None = None) -> str:
    response = host.http(key).post("/v1/runs", json={"workflowId": workflow, "inputs": inputs or {}})
    assert response.status_code == 201, response.text
    run_id: str = response.json()["runId"]
    return run_id


def _wait_status(host: Host, key: str, run_id: str, status: str) -> None:
    wait_until(
        lambda: host.http(key).get(f"/v1/runs/{run_id}").json()["status"] == status, what=f"{run_id} to be {status}"
    )


def _log(host: Host, key: str, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = (
        host.http(key).get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()["events"]
    )
    return events


def _resolve(host: Host, key: str, run_id: str, node: str, value: dict[str, Any]) -> None:
    response = host.http(key).post(f"/v1/runs/{run_id}/interrupts/{node}", json={"resumeValue": value})
    assert response.status_code == 200, response.text


# --- resume -------------------------------------------------------------------------------------


def test_resume_with_last_event_id_across_a_dropped_stream(host: Host, key: str) -> None:
    run_id = _create(host, key, "approval-gated", {"prompt": "draft"})
    # Drop in the middle of the suspension batch: approval.requested follows interrupt.requested.
    first = _read_until(host, key, run_id, lambda f: f.event == "interrupt.requested")
    assert [f.event for f in first][-2:] == ["node.suspended", "interrupt.requested"]
    _wait_status(host, key, run_id, "waiting-approval")
    _resolve(host, key, run_id, "gate", {"action": "accept"})

    rest = _read_all(host, key, run_id, last_event_id=first[-1].id)
    union = first + rest
    _check_frames(union, run_id)
    sequences = [f.doc["sequence"] for f in union]
    assert sequences == list(range(len(union))), "a gap or a duplicate across the reconnect"
    assert rest[0].event == "approval.requested", "the resumption point itself is not re-sent; the next one is"
    assert union[-1].event == "run.completed"
    assert [f.doc for f in union] == _log(host, key, run_id), "the stream and the log agree event for event"


def test_resume_while_the_run_is_still_waiting_tails_live(host: Host, key: str) -> None:
    run_id = _create(host, key, "approval-gated", {"prompt": "draft"})
    first = _read_until(host, key, run_id, lambda f: f.event == "approval.requested")
    got: list[Frame] = []
    connected = threading.Event()
    errors: list[BaseException] = []

    def observe() -> None:
        try:
            with _stream(host, key, run_id, last_event_id=first[-1].id) as response:
                assert response.status_code == 200
                connected.set()
                got.extend(_frames(response))
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
            connected.set()

    thread = threading.Thread(target=observe)
    thread.start()
    assert connected.wait(STREAM_TIMEOUT)
    _resolve(host, key, run_id, "gate", {"action": "reject", "feedback": "not yet"})
    thread.join(STREAM_TIMEOUT + 5)
    assert not thread.is_alive(), "the stream did not close after the terminal event"
    assert not errors, errors
    _check_frames(got, run_id)
    assert [f.doc["sequence"] for f in first + got] == list(range(len(first) + len(got)))
    types = [f.event for f in got]
    assert types[0] == "interrupt.resolved" and types[-1] == "run.completed"
    assert "approval.received" in types and "node.failed" in types


def test_last_event_id_resumes_on_a_terminal_run_and_past_its_end(host: Host, key: str) -> None:
    run_id = _create(host, key, "multi-step", {"prompt": "p"})
    _wait_status(host, key, run_id, "completed")
    full = _read_all(host, key, run_id)
    tail = _read_all(host, key, run_id, last_event_id="3")
    assert [f.data for f in tail] == [f.data for f in full[4:]]
    assert _read_all(host, key, run_id, last_event_id=full[-1].id) == []
    assert _read_all(host, key, run_id, last_event_id="1000") == []


@pytest.mark.parametrize("value", ["abc", "1.5", "evt_0123", "-7"])
def test_non_numeric_last_event_id_is_refused(host: Host, key: str, value: str) -> None:
    run_id = _create(host, key, "echo", {"prompt": "p"})
    response = host.http(key).get(
        f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": value, "Accept": "text/event-stream"}
    )
    assert response.status_code == 400
    body = response.json()
    openwop_validator("error-envelope").validate(body)
    assert body["error"] == "validation_error"
    assert "Last-Event-ID" in body["message"]


# --- many observers -------------------------------------------------------------------------------


@pytest.mark.parametrize("observers", [2, 5])
def test_concurrent_observers_see_identical_streams(host: Host, key: str, observers: int) -> None:
    run_id = _create(host, key, "approval-gated", {"prompt": "shared"})
    results: list[list[Frame]] = [[] for _ in range(observers)]
    ready = [threading.Event() for _ in range(observers)]
    errors: list[BaseException] = []

    def observe(i: int) -> None:
        try:
            with _stream(host, key, run_id) as response:
                assert response.status_code == 200
                for frame in _frames(response):
                    results[i].append(frame)
                    if frame.event == "approval.requested":
                        ready[i].set()
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            ready[i].set()

    threads = [threading.Thread(target=observe, args=(i,)) for i in range(observers)]
    for t in threads:
        t.start()
    for event in ready:
        assert event.wait(STREAM_TIMEOUT), "an observer never reached the gate"
    assert not errors, errors
    # Every observer is connected and waiting: the rest of the run arrives live to all of them.
    _resolve(host, key, run_id, "gate", {"action": "accept", "feedback": "ok"})
    for t in threads:
        t.join(STREAM_TIMEOUT + 5)
        assert not t.is_alive(), "a stream did not close after run.completed"
    assert not errors, errors
    reference = results[0]
    _check_frames(reference, run_id)
    assert reference[-1].event == "run.completed"
    assert [f.doc["sequence"] for f in reference] == list(range(len(reference)))
    for other in results[1:]:
        assert other == reference, "observers saw different event lists"


def test_observers_in_different_modes_share_one_log(host: Host, key: str) -> None:
    run_id = _create(host, key, "multi-step", {"prompt": "p"})
    out: dict[str, list[Frame]] = {}
    errors: list[BaseException] = []

    def observe(mode: str) -> None:
        try:
            out[mode] = _read_all(host, key, run_id, mode=mode)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=observe, args=(m,)) for m in ("debug", "updates", "debug", "updates")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(STREAM_TIMEOUT + 5)
    assert not errors, errors
    debug, updates = out["debug"], out["updates"]
    assert [f.data for f in updates] == [f.data for f in debug if f.event in SPEC_UPDATES]


# --- stream modes --------------------------------------------------------------------------------


def test_updates_mode_omits_node_started_and_debug_has_it(host: Host, key: str) -> None:
    run_id = _create(host, key, "approval-gated", {"prompt": "p"})
    _wait_status(host, key, run_id, "waiting-approval")
    _resolve(host, key, run_id, "gate", {"action": "ask", "question": "why?"})
    _resolve(host, key, run_id, "gate", {"action": "accept"})
    _wait_status(host, key, run_id, "completed")

    default = _read_all(host, key, run_id, mode=None)
    updates = _read_all(host, key, run_id, mode="updates")
    debug = _read_all(host, key, run_id, mode="debug")
    for frames in (default, updates, debug):
        _check_frames(frames, run_id)
    assert default == updates, "updates is the default mode"
    debug_types = [f.event for f in debug]
    assert "node.started" in debug_types and "log.appended" in debug_types
    assert [f.doc for f in debug] == _log(host, key, run_id)
    assert "node.started" not in [f.event for f in updates]
    assert "log.appended" not in [f.event for f in updates]
    assert [f.data for f in updates] == [f.data for f in debug if f.event in SPEC_UPDATES]
    assert updates[0].event == "run.started" and updates[-1].event == "run.completed"


@pytest.mark.parametrize("mode", ["bogus", "updates,bogus", "values", "DEBUG"])
def test_unknown_stream_mode_is_refused(host: Host, key: str, mode: str) -> None:
    run_id = _create(host, key, "echo", {"prompt": "p"})
    response = host.http(key).get(
        f"/v1/runs/{run_id}/events", params={"streamMode": mode}, headers={"Accept": "text/event-stream"}
    )
    assert response.status_code == 400
    body = response.json()
    openwop_validator("error-envelope").validate(body)
    assert body["error"] == "unsupported_stream_mode"
    supported = body["details"]["supported"]
    assert "updates" in supported and "debug" in supported
    assert mode not in supported


def test_combined_modes_are_accepted(host: Host, key: str) -> None:
    run_id = _create(host, key, "echo", {"prompt": "p"})
    _wait_status(host, key, run_id, "completed")
    combined = _read_all(host, key, run_id, mode="updates,messages")
    assert [f.event for f in combined] == ["run.started", "node.completed", "run.completed"]


def test_stream_of_a_terminal_run_replays_and_closes(host: Host, key: str) -> None:
    run_id = _create(host, key, "echo", {"prompt": "hello"})
    _wait_status(host, key, run_id, "completed")
    frames = _read_all(host, key, run_id)  # would time out if the server kept it open
    _check_frames(frames, run_id)
    assert [f.event for f in frames] == ["run.started", "node.started", "node.completed", "run.completed"]
    assert [f.doc["sequence"] for f in frames] == [0, 1, 2, 3]
    assert frames[-1].doc["payload"]["outputs"] == {"payload": "hello"}


def test_stream_of_a_cancelled_run_ends_with_run_cancelled(host: Host, key: str) -> None:
    run_id = _create(host, key, "clarification-gated")
    _read_until(host, key, run_id, lambda f: f.event == "clarification.requested")
    response = host.http(key).post(f"/v1/runs/{run_id}/cancel", json={"reason": "stop"})
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    frames = _read_all(host, key, run_id)
    _check_frames(frames, run_id)
    assert frames[-1].event == "run.cancelled"
    assert frames[-1].doc["payload"]["reason"] == "stop"


def test_stream_of_an_unknown_run_is_a_json_404(host: Host, key: str) -> None:
    response = host.http(key).get("/v1/runs/run_does_not_exist/events", headers={"Accept": "text/event-stream"})
    assert response.status_code == 404
    body = response.json()
    openwop_validator("error-envelope").validate(body)
    assert body["error"] == "not_found"
