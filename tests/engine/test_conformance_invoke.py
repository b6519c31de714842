"""The conformance hand-off names are served only when the bridge can run: test seams on and a peer set."""

from __future__ import annotations

import pytest
from workflow_docs import node, workflow_doc

from tether.engine.nodes import HANDOFF_ALIASES, CallPeer, NodeContext, node_handlers
from tether.engine.registry import WorkflowRegistry

ROUNDTRIP = workflow_doc(
    "conformance-a2a-task-roundtrip", [node("invoke", "core.conformance.a2a-invoke", config={"skill": "echo"})], []
)


@pytest.mark.parametrize(
    ("seams", "peer", "served"),
    [
        (False, None, False),
        (False, "https://peer.example", False),
        (True, None, False),
        (True, "https://p.example", True),
    ],
)
def test_the_fixture_is_executable_and_advertised_only_when_the_bridge_can_run_it(
    seams: bool, peer: str | None, served: bool
) -> None:
    handlers = node_handlers(test_seams=seams, conformance_peer=peer)
    assert all((alias in handlers) is served for alias in HANDOFF_ALIASES)
    registry = WorkflowRegistry(frozenset(handlers))
    registry.add_raw(ROUNDTRIP, "fixture")
    assert registry.executable_fixtures() == (["conformance-a2a-task-roundtrip"] if served else [])


def test_an_alias_calls_the_conformance_peer_with_the_runs_variables_when_the_node_maps_no_input() -> None:
    invoke = node_handlers(test_seams=True, conformance_peer="https://peer.example")["core.a2a.invoke"]
    ctx = NodeContext("run_1", "invoke", "core.a2a.invoke", {"skill": "echo"}, {}, {"driftScenario": "rejected"}, {})
    outcome = invoke(ctx)
    assert isinstance(outcome, CallPeer)
    assert outcome.call.agent == "https://peer.example" and outcome.call.skill == "echo"
    assert outcome.call.data == {"driftScenario": "rejected"} and outcome.call.text is None
    pinned = invoke(
        NodeContext("run_1", "n", "core.a2a.invoke", {"agent": "https://b.example"}, {"prompt": "hi"}, {}, {})
    )
    assert isinstance(pinned, CallPeer) and pinned.call.agent == "https://b.example" and pinned.call.text == "hi"
