"""message/stream and tasks/resubscribe: event order, final flags, many observers, exact replay."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from a2a_wire import Frame, get_task, message, open_stream, run_events, send, stream, transitions, wait_state
from harness import Host


def _summary(frames: list[Frame]) -> list[tuple[Any, ...]]:
    """What each frame says of the task, progress reports left out (they have tests of their own)."""
    return [(f.kind, f.state, f.result.get("final")) for f in transitions(frames)]


def _after(frames: list[Frame], sequence: int) -> list[tuple[Any, ...]]:
    """The frames of the run events after ``sequence`` (an id-less frame belongs to the next id)."""
    kept: list[tuple[Any, ...]] = []
    group: list[Frame] = []
    for frame in frames:
        group.append(frame)
        if frame.id is not None:
            if frame.id > sequence:
                kept.extend((f.id, f.body) for f in group)
            group = []
    return kept


def _check_ids(http: httpx.Client, task_id: str, frames: list[Frame]) -> None:
    """Every id: is a real run sequence, ids only grow, and the last frame of a stream has one."""
    sequences = {e["sequence"] for e in run_events(http, task_id)}
    ids = [f.id for f in frames if f.id is not None]
    assert ids == sorted(set(ids)) and set(ids) <= sequences
    assert frames[-1].id is not None


def test_message_stream_runs_to_completion(http: httpx.Client) -> None:
    frames = stream(http, "message/stream", {"message": message("hello")})
    assert _summary(frames) == [
        ("task", "working", None),
        ("artifact-update", None, None),
        ("status-update", "completed", True),
    ]
    task_id = frames[0].result["id"]
    assert frames[0].id == 0
    assert frames[1].id is None, "only the last frame of a run event carries its sequence"
    assert frames[1].result["artifact"]["parts"][0] == {"kind": "text", "text": "hello"}
    assert frames[1].result["lastChunk"] is True
    assert {f.body["id"] for f in frames} == {"s"}
    _check_ids(http, task_id, frames)
    assert get_task(http, task_id)["status"]["state"] == "completed"


def test_message_stream_ends_at_input_required_and_the_reply_streams_on(http: httpx.Client) -> None:
    frames = stream(http, "message/stream", {"message": message("draft", skill="approval-gated")})
    assert (
        frames[-1].kind == "status-update"
        and frames[-1].state == "input-required"
        and frames[-1].result["final"] is True
    )
    assert frames[-1].result["metadata"]["openwop"]["interrupt"]["kind"] == "approval"
    assert [f.kind for f in transitions(frames)[:-1]] == ["task"]
    task = frames[0].result
    reply = stream(http, "message/stream", {"message": message(data={"action": "accept"}, task_id=task["id"])})
    assert reply[0].kind == "task" and reply[0].result["id"] == task["id"]
    assert reply[-1].state == "completed" and reply[-1].result["final"] is True
    _check_ids(http, task["id"], reply)


def test_resubscribe_stays_attached_through_the_decision(http: httpx.Client, host: Host, key: str) -> None:
    task = send(http, message(skill="slow-gate"), blocking=False)
    seen: list[Frame] = []
    with open_stream(http, "tasks/resubscribe", {"id": task["id"]}) as frames:
        for frame in frames:
            seen.append(frame)
            if frame.state == "input-required" and frame.kind == "status-update":
                assert frame.result["final"] is False, "a resubscribe stays attached through input-required"
                with host.client(key) as approver:
                    send(approver, message(data={"action": "accept"}, task_id=task["id"]), blocking=False)
    assert _summary(seen) == [
        ("task", "working", None),
        ("status-update", "input-required", False),
        ("status-update", "working", False),
        ("status-update", "completed", True),
    ]
    _check_ids(http, task["id"], seen)
    started = [e for e in run_events(http, task["id"]) if e["type"] == "run.started"]
    assert len(started) == 1, "resubscribing never executes anything again"


def test_resubscribe_to_a_terminal_task_sends_the_final_task_only(http: httpx.Client) -> None:
    done = send(http, message("hi"))
    (only,) = stream(http, "tasks/resubscribe", {"id": done["id"]})
    assert only.kind == "task" and only.state == "completed"
    assert only.result["artifacts"] == done["artifacts"]
    assert only.id == max(e["sequence"] for e in run_events(http, done["id"]))


@pytest.mark.fresh_host  # counts every run of the tenant
def test_concurrent_resubscribers_see_the_same_events_in_the_same_order(
    host: Host, key: str, http: httpx.Client
) -> None:
    task = send(http, message("draft", skill="approval-gated"))
    observers = 5
    attached = threading.Barrier(observers + 1)
    seen: list[list[Frame]] = [[] for _ in range(observers)]

    def observe(index: int) -> None:
        with (
            host.client(key) as client,
            open_stream(client, "tasks/resubscribe", {"id": task["id"]}, request_id=1) as frames,
        ):
            for number, frame in enumerate(frames):
                seen[index].append(frame)
                if number == 0:
                    attached.wait(timeout=15)

    threads = [threading.Thread(target=observe, args=(i,)) for i in range(observers)]
    for t in threads:
        t.start()
    attached.wait(timeout=15)
    send(http, message(data={"action": "accept"}, task_id=task["id"]), blocking=False)
    for t in threads:
        t.join(timeout=30)
    reference = [(f.id, f.body) for f in seen[0]]
    assert reference[-1][1]["result"]["status"]["state"] == "completed"
    for other in seen[1:]:
        assert [(f.id, f.body) for f in other] == reference
    assert len([e for e in run_events(http, task["id"]) if e["type"] == "run.started"]) == 1
    assert len(http.get("/v1/runs").json()["runs"]) == 1


def test_last_event_id_replays_exactly_what_was_missed(http: httpx.Client) -> None:
    task = send(http, message("draft", skill="approval-gated"))
    with open_stream(http, "tasks/resubscribe", {"id": task["id"]}) as frames:
        first = next(frames)
    assert first.kind == "task" and first.id is not None
    send(http, message(data={"action": "accept"}, task_id=task["id"]))  # happens while nobody listens
    resumed = stream(http, "tasks/resubscribe", {"id": task["id"]}, headers={"Last-Event-ID": str(first.id)})
    assert resumed and all(f.kind != "task" for f in resumed), "no snapshot first"
    assert resumed[-1].state == "completed" and resumed[-1].result["final"] is True

    full = stream(http, "tasks/resubscribe", {"id": task["id"], "metadata": {"lastSequence": -1}})
    assert [f.state for f in transitions(full) if f.kind == "status-update"] == [
        "working",
        "input-required",
        "working",
        "completed",
    ]
    assert _after(full, first.id) == [(f.id, f.body) for f in resumed]
    for cut, frame in enumerate(full):
        if frame.id is None or frame is full[-1]:
            continue
        by_header = stream(http, "tasks/resubscribe", {"id": task["id"]}, headers={"Last-Event-ID": str(frame.id)})
        by_metadata = stream(http, "tasks/resubscribe", {"id": task["id"], "metadata": {"lastSequence": frame.id}})
        expected = [(f.id, f.body) for f in full[cut + 1 :]]
        assert [(f.id, f.body) for f in by_header] == expected, f"gap or duplicate after sequence {frame.id}"
        assert [(f.id, f.body) for f in by_metadata] == expected
    assert len([e for e in run_events(http, task["id"]) if e["type"] == "run.started"]) == 1


def test_a_sequence_never_sent_is_refused(http: httpx.Client) -> None:
    task = send(http, message("hi"))
    (refused,) = stream(http, "tasks/resubscribe", {"id": task["id"]}, headers={"Last-Event-ID": "9999"})
    assert refused.body["error"]["code"] == -32602 and "never sent" in refused.body["error"]["message"]
    (garbage,) = stream(http, "tasks/resubscribe", {"id": task["id"]}, headers={"Last-Event-ID": "abc"})
    assert garbage.body["error"]["code"] == -32602
    last = max(e["sequence"] for e in run_events(http, task["id"]))
    assert stream(http, "tasks/resubscribe", {"id": task["id"]}, headers={"Last-Event-ID": str(last)}) == []


def test_resubscribe_while_working_follows_to_completion(http: httpx.Client) -> None:
    task = send(http, message(skill="slow"), blocking=False)
    wait_state(http, task["id"], "working")
    states: list[dict[str, Any]] = []
    with open_stream(http, "tasks/resubscribe", {"id": task["id"]}) as frames:
        for frame in frames:
            states.append({"kind": frame.kind, "state": frame.state})
    assert states[0] == {"kind": "task", "state": "working"} and states[-1] == {
        "kind": "status-update",
        "state": "completed",
    }
