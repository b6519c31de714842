"""The DAG scheduler: given a workflow and a run's snapshot, what happens next.

Pure and deterministic: the same snapshot always yields the same decision, which is
what lets a restarted host continue a run exactly where the log says it stopped.
Nodes run one at a time, in the order of ``nodes[]`` among those that are ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tether.engine import expressions
from tether.engine.state import NODE_FINISHED, Snapshot
from tether.engine.workflow import ConnectionPort, Edge, ExpressionPort, StaticPort, VariablePort, WorkflowDefinition
from tether.run_state import ErrorObject

#: outgoing edge rules that consume a failure (the failure is then routed, not fatal)
FAILURE_ROUTES = frozenset({"any_failed", "all_complete"})


@dataclass(frozen=True, slots=True)
class Execute:
    node_id: str
    resume: bool  # True when the node was already started (recovery of an in-flight node)


@dataclass(frozen=True, slots=True)
class Skip:
    node_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Finish:
    outputs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Fail:
    node_id: str
    error: ErrorObject


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing to do until someone resolves the run's interrupt."""


Decision = Execute | Skip | Finish | Fail | Wait


def node_outputs(state: Snapshot) -> dict[str, Any]:
    return {
        nid: entry.get("outputs", {})
        for nid, entry in state.get("nodeStates", {}).items()
        if entry.get("status") == "completed"
    }


def _edge_context(state: Snapshot) -> dict[str, Any]:
    return {"variables": state.get("variables", {}), "inputs": state.get("inputs", {}), "nodes": node_outputs(state)}


def _edge_active(edge: Edge, source_status: str, context: dict[str, Any]) -> bool:
    if edge.condition is not None and source_status == "completed":
        if not expressions.condition_holds(edge.condition, context):
            return False
    return True


def _trigger_satisfied(edges: list[Edge], statuses: dict[str, str], context: dict[str, Any]) -> bool:
    """Whether a node whose sources have all finished should run.

    Edges are grouped by rule: all_success edges need every source completed;
    none_failed edges need no failed source; all_complete edges are always met;
    any_success / any_failed need at least one source of their group completed / failed.
    An edge whose condition is false counts as if its source had not succeeded.
    """
    any_success: list[bool] = []
    any_failed: list[bool] = []
    for edge in edges:
        status = statuses[edge.sourceNodeId]
        succeeded = status == "completed" and _edge_active(edge, status, context)
        rule = edge.triggerRule
        if rule == "all_success" and not succeeded:
            return False
        if rule == "none_failed" and status == "failed":
            return False
        if rule == "any_success":
            any_success.append(succeeded)
        if rule == "any_failed":
            any_failed.append(status == "failed")
    if any_success and not any(any_success):
        return False
    if any_failed and not any(any_failed):
        return False
    return True


def _unhandled_failure(wf: WorkflowDefinition, state: Snapshot) -> tuple[str, ErrorObject] | None:
    for node in wf.nodes:
        entry = state.get("nodeStates", {}).get(node.id)
        if entry and entry.get("status") == "failed":
            if not any(edge.triggerRule in FAILURE_ROUTES for edge in wf.outgoing(node.id)):
                return node.id, entry.get("error") or {
                    "code": "node_execution_failed",
                    "message": f"node {node.id} failed",
                }
    return None


def run_outputs(wf: WorkflowDefinition, state: Snapshot) -> dict[str, Any]:
    """The run's outputs: primary nodes' outputs, else those of completed sink nodes."""
    outputs_by_node = node_outputs(state)
    primary = [n.id for n in wf.nodes if n.outputRole == "primary" and n.id in outputs_by_node]
    chosen = primary or [n.id for n in wf.nodes if not wf.outgoing(n.id) and n.id in outputs_by_node]
    merged: dict[str, Any] = {}
    for node_id in chosen:
        value = outputs_by_node[node_id]
        if isinstance(value, dict):
            merged.update(value)
    return merged


def plan(wf: WorkflowDefinition, state: Snapshot) -> Decision:
    """The next step of a running run."""
    node_states: dict[str, Any] = state.get("nodeStates", {})
    if state.get("interrupt"):
        return Wait()
    for node in wf.nodes:
        entry = node_states.get(node.id)
        if entry and entry.get("status") in ("running", "suspended"):
            return Execute(node.id, resume=True)
    failure = _unhandled_failure(wf, state)
    if failure is not None:
        return Fail(*failure)
    statuses = {nid: entry.get("status", "") for nid, entry in node_states.items()}
    context: dict[str, Any] | None = None
    for node in wf.nodes:
        if node.id in statuses:
            continue
        incoming = wf.incoming(node.id)
        if any(statuses.get(e.sourceNodeId) not in NODE_FINISHED for e in incoming):
            continue
        if node.disabled:
            return Skip(node.id, "disabled")
        if incoming:
            if context is None:
                context = _edge_context(state)
            if not _trigger_satisfied(incoming, statuses, context):
                return Skip(node.id, "trigger rule not met")
        return Execute(node.id, resume=False)
    return Finish(run_outputs(wf, state))


def resolve_inputs(wf: WorkflowDefinition, node_id: str, state: Snapshot) -> dict[str, Any]:
    """A node's input ports, from static values, variables, expressions, connections and edges."""
    node = wf.node(node_id)
    outputs = node_outputs(state)
    variables = state.get("variables", {})
    resolved: dict[str, Any] = {}
    for edge in wf.incoming(node_id):
        source = outputs.get(edge.sourceNodeId)
        if isinstance(source, dict) and edge.sourceOutput in source:
            resolved[edge.targetInput] = source[edge.sourceOutput]
    for port, value in node.inputs.items():
        if isinstance(value, StaticPort):
            resolved[port] = value.value
        elif isinstance(value, VariablePort):
            if value.variableName in variables:
                resolved[port] = variables[value.variableName]
        elif isinstance(value, ConnectionPort):
            source = outputs.get(value.nodeId)
            if isinstance(source, dict) and value.outputKey in source:
                resolved[port] = source[value.outputKey]
        elif isinstance(value, ExpressionPort):
            resolved[port] = expressions.evaluate(
                value.expression, {"variables": variables, "inputs": resolved, "nodes": outputs}
            )
    return resolved
