"""Progress on the stream: a multi-step task names each step that starts or finishes, in both versions.

A caller watching a long multi-node run used to see its first frame and then nothing
until the end. Every ``node.started``/``node.completed`` of a task with more than one
step is now a ``working`` update whose message names the step; a one-step task says
nothing in between, and pushes stay on the floor transitions (``test_a2a_push``).
"""

from __future__ import annotations

import httpx
from a2a_wire import message, run_events, send, stream, transitions
from a2a_wire10 import result10, stream10, user10

#: multi-step's nodes, in its workflow's order: (id, name)
STEPS = [("a", "A"), ("b", "B"), ("c", "C")]


def _expected_reports() -> list[tuple[str, str, int]]:
    return [(node, event, index) for index, (node, _) in enumerate(STEPS, 1) for event in ("started", "finished")]


def test_a_0_3_stream_names_every_step_as_it_starts_and_finishes(http: httpx.Client) -> None:
    frames = stream(http, "message/stream", {"message": message("go", skill="multi-step")})
    reports = [f.progress for f in frames if f.progress is not None]
    assert [(p["nodeId"], p["event"], p["index"]) for p in reports] == _expected_reports()
    assert all(p["of"] == 3 for p in reports)
    for frame in frames:
        if frame.progress is not None:
            status = frame.result["status"]
            assert status["state"] == "working" and frame.result["final"] is False
            text = status["message"]["parts"][0]["text"]
            assert frame.progress["step"] in text and frame.progress["event"] in text
    assert [(f.kind, f.state) for f in transitions(frames)][-1] == ("status-update", "completed")
    # each report comes from the node event it names, in the run's own order
    task_id = frames[0].result["id"]
    node_events = [
        (e["payload"]["nodeId"], "started" if e["type"] == "node.started" else "finished")
        for e in run_events(http, task_id)
        if e["type"] in ("node.started", "node.completed")
    ]
    assert node_events == [(node, event) for node, event, _ in _expected_reports()]


def test_a_1_0_stream_and_a_resubscribe_report_the_same_steps(http: httpx.Client) -> None:
    frames = stream10(http, "SendStreamingMessage", {"message": user10("go", skill="multi-step")})
    assert frames[0].member == "task" and frames[-1].state == "TASK_STATE_COMPLETED"
    reports = [f.progress for f in frames if f.progress is not None]
    assert [(p["nodeId"], p["event"], p["index"]) for p in reports] == _expected_reports()
    for frame in frames:
        if frame.progress is not None:
            assert frame.state == "TASK_STATE_WORKING"
    # a 0.3 re-attachment from the start replays the very same reports
    task_id = frames[0].result["task"]["id"]
    replayed = stream(http, "tasks/resubscribe", {"id": task_id, "metadata": {"lastSequence": -1}})
    assert [f.progress for f in replayed if f.progress is not None] == reports


def test_a_one_step_task_reports_no_steps(http: httpx.Client) -> None:
    frames = stream(http, "message/stream", {"message": message("hi", skill="echo")})
    assert [f.progress for f in frames if f.progress is not None] == []
    done = result10(http, "SendMessage", {"message": user10("hi", skill="echo")})
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_task_read_after_the_fact_is_not_stuck_on_a_step(http: httpx.Client) -> None:
    task = send(http, message("go", skill="multi-step"))
    assert task["status"]["state"] == "completed"
    assert "progress" not in task["metadata"]["openwop"], "a Task shows its state, not the last step reported"
