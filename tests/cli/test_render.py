"""The CLI's rendering helpers, from literal snapshots: what an operator reads for each state."""

from __future__ import annotations

from typing import Any

from tether.cli import _render as render
from tether.store.base import KeyRow

ALL = ("manifest:read", "runs:create", "runs:read")

WAITING_APPROVAL: dict[str, Any] = {
    "runId": "run_abc123",
    "workflowId": "approval-gated",
    "status": "waiting-approval",
    "currentNodeId": "gate",
    "createdAt": "2024-05-01T12:00:03.000Z",
    "startedAt": "2024-05-01T12:00:03.120Z",
    "updatedAt": "2024-05-01T12:00:04.456Z",
    "interrupt": {
        "kind": "approval",
        "nodeId": "gate",
        "interruptId": "int_1",
        "key": "run_abc123:gate:0",
        "data": {
            "artifactId": "run_abc123:gate",
            "artifactType": "json",
            "title": "Approve the draft",
            "description": "Accept to publish the draft",
            "actions": ["accept", "reject", "refine"],
            "artifactData": {"payload": "hello"},
        },
        "requestedAt": "2024-05-01T12:00:04.456Z",
    },
}

WAITING_INPUT: dict[str, Any] = {
    "runId": "run_q",
    "workflowId": "clarification-gated",
    "status": "waiting-input",
    "currentNodeId": "ask",
    "interrupt": {
        "kind": "clarification",
        "nodeId": "ask",
        "data": {"questions": [{"id": "colour", "question": "Which colour?"}, {"id": "size", "question": "How big?"}]},
    },
}

FAILED: dict[str, Any] = {
    "runId": "run_f",
    "workflowId": "shape",
    "status": "failed",
    "startedAt": "2024-05-01T12:00:03.120Z",
    "completedAt": "2024-05-01T12:00:05.000Z",
    "error": {"code": "approval_rejected", "message": "the gate was rejected", "details": {"nodeId": "gate"}},
}

COMPLETED: dict[str, Any] = {
    "runId": "run_c",
    "workflowId": "echo",
    "status": "completed",
    "outputs": {"payload": "hi there"},
}


# --- summaries ---------------------------------------------------------------------------


def test_waiting_approval_summary_shows_the_gate_and_how_to_decide() -> None:
    text = render.run_summary(WAITING_APPROVAL)
    assert "run_abc123" in text
    assert "waiting-approval" in text
    assert "waiting for approval at node 'gate'" in text
    assert "Approve the draft" in text
    assert "Accept to publish the draft" in text
    assert "accept, reject, refine" in text
    assert "tether runs approve run_abc123" in text
    assert "tether runs reject run_abc123" in text
    assert '{"payload":"hello"}' in text


def test_waiting_input_summary_lists_questions_and_the_answer_command() -> None:
    text = render.run_summary(WAITING_INPUT)
    assert "waiting for clarification at node 'ask'" in text
    assert "colour: Which colour?" in text
    assert "size: How big?" in text
    assert "tether runs answer run_q --answer colour=VALUE --answer size=VALUE" in text
    assert "approve" not in text


def test_failed_summary_shows_the_error() -> None:
    text = render.run_summary(FAILED)
    assert "status:       failed" in text
    assert "error: the gate was rejected (approval_rejected)" in text
    assert '"nodeId":"gate"' in text
    assert "finished:     2024-05-01 12:00:05Z" in text
    assert "waiting for" not in text


def test_completed_summary_shows_outputs() -> None:
    text = render.run_summary(COMPLETED)
    assert "outputs:" in text
    assert '"payload": "hi there"' in text
    assert "error" not in text


def test_a_host_that_nests_the_interrupt_under_payload_is_understood() -> None:
    interrupt = {"kind": "approval", "nodeId": "gate", "payload": {"kind": "approval", "data": {"title": "Ship it?"}}}
    assert render.interrupt_data(interrupt) == {"title": "Ship it?"}
    text = render.run_summary({**WAITING_APPROVAL, "interrupt": interrupt})
    assert "Ship it?" in text


HANDED_OFF = {
    "runId": "run_h",
    "workflowId": "hand",
    "status": "running",
    "nodeStates": {
        "done": {"status": "completed"},
        "peer": {
            "status": "running",
            "typeId": "vendor.tether.a2a-handoff",
            "handoff": {
                "agent": "https://b.example:8443",
                "version": "0.3",
                "taskId": "task_b1",
                "peerState": "working",
                "observedAt": "2024-05-01T12:00:03.120Z",
                "lastReadAt": "2024-05-01T12:07:41.500Z",
                "credential": "b-key",
            },
        },
    },
}


def test_a_run_waiting_on_a_peer_says_whom_which_task_its_state_and_when_it_was_read() -> None:
    text = render.run_summary(HANDED_OFF)
    assert "waiting on a peer at node 'peer'" in text
    assert "peer:        https://b.example:8443" in text
    assert "remote task: task_b1, A2A 0.3" in text
    assert "peer state:  working (since 2024-05-01 12:00:03Z)" in text
    assert "last read:   2024-05-01 12:07:41Z" in text
    assert "credential:  b-key" in text
    assert render.waiting_for(HANDED_OFF) == "peer working @ peer"


def test_a_hand_off_read_by_another_host_or_not_yet_accepted_says_so() -> None:
    handoff = HANDED_OFF["nodeStates"]["peer"]["handoff"]  # type: ignore[index]
    elsewhere = {
        **HANDED_OFF,
        "nodeStates": {"peer": {"status": "running", "handoff": {**handoff, "lastReadAt": None}}},
    }
    assert "last read:   not by the host that answered" in render.run_summary(elsewhere)
    sending = {**HANDED_OFF, "nodeStates": {"peer": {"status": "running", "handoff": {"agent": "https://b.example"}}}}
    assert "remote task: not yet accepted by the peer" in render.run_summary(sending)
    finished = {
        **HANDED_OFF,
        "status": "completed",
        "nodeStates": {"peer": {"status": "completed", "handoff": handoff}},
    }
    assert "waiting on a peer" not in render.run_summary(finished) and render.waiting_for(finished) == ""


# --- run table -----------------------------------------------------------------------------


def test_waiting_for_names_the_interrupt_kind_and_node() -> None:
    assert render.waiting_for(WAITING_APPROVAL) == "approval @ gate"
    assert render.waiting_for(WAITING_INPUT) == "clarification @ ask"
    assert render.waiting_for(COMPLETED) == ""
    assert render.waiting_for({**COMPLETED, "interrupt": None}) == ""


def test_runs_table_shows_each_run() -> None:
    text = render.to_text(render.runs_table([WAITING_APPROVAL, COMPLETED]), width=160)
    assert "run_abc123" in text and "run_c" in text
    assert "approval @ gate" in text
    assert "2024-05-01 12:00:03Z" in text  # started
    assert "2024-05-01 12:00:04Z" in text  # updated


def test_runs_table_never_shortens_a_run_id_in_a_narrow_terminal() -> None:
    run_id = "run_01a22c6da8e876d3ab0015113546cba9"
    text = render.to_text(render.runs_table([{**WAITING_APPROVAL, "runId": run_id}]), width=80)
    assert run_id in text


# --- keys and workflows --------------------------------------------------------------------


def test_keys_table_never_shows_the_hash() -> None:
    rows = [
        KeyRow("0123456789abcdef", "ci-bot", "default", list(ALL), "f" * 64, "2024-05-01T12:00:00.000Z"),
        KeyRow(
            "fedcba9876543210",
            "old",
            "acme",
            ["runs:read"],
            "e" * 64,
            "2024-04-01T00:00:00.000Z",
            "2024-04-02T00:00:00.000Z",
        ),
    ]
    text = render.to_text(render.keys_table(rows, ALL))
    assert "ci-bot" in text and "old" in text and "acme" in text
    assert "ffff" not in text and "eeee" not in text
    assert "all" in text
    assert "runs:read" in text
    assert "2024-04-02 00:00:00Z" in text


def test_scopes_label() -> None:
    assert render.scopes_label(["runs:read", "manifest:read", "runs:create"], ALL) == "all"
    assert render.scopes_label(["runs:read"], ALL) == "runs:read"
    assert render.scopes_label(["a", "b"]) == "a, b"


def test_workflows_table_shows_problems_and_does_not_read_markup() -> None:
    workflows = [
        {"id": "echo", "name": "Echo", "version": "1.0.0", "source": "bundled", "executable": True, "problems": []},
        {
            "id": "odd",
            "name": "[red]Odd",
            "version": "2",
            "source": "fixtures",
            "executable": False,
            "problems": ["node 'x' has typeId 'vendor.thing', which this host does not support"],
        },
    ]
    text = render.to_text(render.workflows_table(workflows), width=200)
    assert "[red]Odd" in text
    assert "vendor.thing" in text
    assert "yes" in text and "no" in text


# --- events and small helpers --------------------------------------------------------------


def test_event_line_shows_sequence_time_type_node_and_payload() -> None:
    event = {
        "eventId": "ev_1",
        "runId": "run_abc123",
        "sequence": 7,
        "timestamp": "2024-05-01T12:00:04.456Z",
        "type": "node.completed",
        "nodeId": "draft",
        "payload": {"nodeId": "draft", "outputs": {"payload": "hello"}},
    }
    line = render.event_line(event)
    assert line.split() == ["7", "12:00:04.456", "node.completed", "draft", '{"outputs":{"payload":"hello"}}']


def test_event_line_without_node_or_payload() -> None:
    line = render.event_line(
        {"sequence": 0, "timestamp": "2024-05-01T12:00:03.120Z", "type": "run.started", "payload": {}}
    )
    assert line.split() == ["0", "12:00:03.120", "run.started", "-"]


def test_event_line_cuts_long_payloads() -> None:
    event = {
        "sequence": 1,
        "timestamp": "2024-05-01T12:00:03.120Z",
        "type": "output.chunk",
        "payload": {"chunk": "x" * 500},
    }
    line = render.event_line(event)
    assert line.endswith("…")
    assert len(line) < 200


def test_when_and_short_json() -> None:
    assert render.when("2024-05-01T12:00:03.120Z") == "2024-05-01 12:00:03Z"
    assert render.when("2024-05-01T12:00:03+02:00") == "2024-05-01 12:00:03+02:00"
    assert render.when(None) == ""
    assert render.short_json({"a": 1}) == '{"a":1}'
    assert render.short_json("y" * 50, limit=10) == '"yyyyyyyy…'
