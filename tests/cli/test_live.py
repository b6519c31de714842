"""The live view draws a run from its events alone: node states and times, what it waits for and
the command that answers it, a lost stream, the end. Literal events, no host (the terminal itself is
tested in ``test_cli_follow``)."""

from __future__ import annotations

from typing import Any

from tether.cli._live import RunView, node_state
from tether.cli._render import to_text

RUN = "run_0123"


def event(sequence: int, type_: str, at: str, node: str | None = None, **payload: Any) -> dict[str, Any]:
    return {
        "runId": RUN,
        "sequence": sequence,
        "type": type_,
        "timestamp": f"2026-12-01T10:00:{at}Z",
        "nodeId": node,
        "payload": payload,
    }


QUESTION = [
    event(0, "run.started", "00.000", inputs={"prompt": "x"}),
    event(1, "node.started", "00.100", "draft", typeId="core.identity"),
    event(2, "node.completed", "01.600", "draft", outputs={}),
    event(3, "node.started", "01.600", "ask", typeId="core.clarificationGate"),
    event(4, "node.suspended", "01.600", "ask", interruptId="int_1"),
    event(
        5,
        "interrupt.requested",
        "01.600",
        "ask",
        kind="clarification",
        key="k",
        data={"title": "Which region?", "questions": [{"id": "region", "question": "Where to ship?"}]},
    ),
]


def view(*events: dict[str, Any]) -> RunView:
    shown = RunView(
        {"runId": RUN, "workflowId": "clarify", "createdAt": "2026-12-01T10:00:00.000Z"},
        [("draft", "core.identity"), ("ask", "core.clarificationGate"), ("ship", "core.noop")],
    )
    for item in events:
        shown.seen(item)
    return shown


def row(text: str, node: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [node])


def test_a_run_waiting_for_an_answer_shows_the_question_and_the_command_that_answers_it() -> None:
    text = to_text(view(*QUESTION).render(), width=160)
    assert "status waiting-input" in text
    assert row(text, "draft") == ["draft", "core.identity", "done", "10:00:00Z", "1.5s"]
    assert row(text, "ask")[:3] == ["ask", "core.clarificationGate", "waiting"] and row(text, "ask")[-1].endswith("…")
    assert row(text, "ship") == ["ship", "core.noop", "pending"]
    assert "region: Where to ship?" in text
    assert f"answer with: tether runs answer {RUN} --answer region=VALUE" in text
    assert "interrupt.requested" in text and "following live" in text


def test_a_lost_stream_is_said_until_the_next_event_and_the_end_is_final() -> None:
    shown = view(*QUESTION)
    shown.reattaching(5, "connection reset")
    assert "lost the stream (connection reset); re-attaching after event 5" in to_text(shown.render(), width=160)
    shown.seen(event(6, "run.failed", "09.000", error={"code": "boom", "message": "it broke"}))
    text = to_text(shown.render(), width=160)
    assert "status failed" in text and "run failed at 2026-12-01 10:00:09Z" in text
    assert "error: it broke (boom)" in text and "answer with" not in text and "re-attaching" not in text


def test_node_states_read_as_a_person_says_them() -> None:
    states = ["running", "suspended", "completed", "failed", "skipped", "cancelled"]
    assert [node_state({"status": s}) for s in states] == [
        "running",
        "waiting",
        "done",
        "failed",
        "skipped",
        "cancelled",
    ]
    assert node_state(None) == node_state({}) == "pending"
