"""Checking workflows and run inputs: what is refused before it is stored or before a run starts.

- :func:`load_workflow` (and :func:`load_workflow_file`) validates a definition against the
  official schema and builds its model (``tether.engine.workflow``), then rejects what the
  schema cannot express: duplicate ids, edges and ports that point at missing nodes, and
  expressions that do not compile. Errors name the offending field through node and edge ids.
- :func:`executability_problems` says why this host cannot run a valid workflow (a node
  type it lacks, a cycle).
- :func:`validate_inputs` checks a run's inputs against the declared variables.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Collection, Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether.engine.expressions import compile_check
from tether.engine.workflow import (
    ConnectionPort,
    DateTime,
    EdgeCondition,
    ExpressionPort,
    Node,
    WorkflowDefinition,
)
from tether.errors import InvalidInput, WorkflowInvalid

__all__ = ["executability_problems", "load_workflow", "load_workflow_file", "validate_inputs"]

# How many individual errors the exception message spells out; details carry them all.
_MESSAGE_ERRORS = 3

_PORT_TAGS = frozenset({"static", "expression", "connection", "variable"})


# --- metadata and settings: open objects whose known keys are still typed ----------------------


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


class _ComplianceConfig(_Open):
    maskingMode: Literal["mask", "omit", "hash", "passthrough"] | None = None


class _Metadata(_Open):
    createdBy: str | None = None
    createdAt: DateTime | None = None
    updatedBy: str | None = None
    updatedAt: DateTime | None = None
    tags: list[Annotated[str, Field(min_length=1, max_length=256)]] | None = Field(default=None, max_length=100)
    category: str | None = None
    author: str | None = None
    codeVersion: str | None = None
    customizedAt: DateTime | None = None
    customizedBy: str | None = None
    forkedFrom: str | None = None
    clonedFrom: str | None = None
    clonedAt: DateTime | None = None
    customProperties: dict[str, Any] | None = None
    complianceClass: Literal["public", "pii", "phi", "pci", "regulated"] | None = None
    complianceConfig: _ComplianceConfig | None = None


class _Settings(_Open):
    timeout: int | None = Field(default=None, ge=0)
    maxRetries: int | None = Field(default=None, ge=0)
    logLevel: Literal["debug", "info", "warn", "error"] | None = None
    maxLoopbackIterations: int | None = Field(default=None, ge=1)


# --- loading -------------------------------------------------------------------------------

Loc = tuple[str | int, ...]

# Top-level arrays whose items are named in error paths by this key.
_LABELS = {"nodes": "id", "edges": "id", "triggers": "id", "variables": "name"}
_PLAIN_KEY = re.compile(r"^[A-Za-z_$][\w$-]*$")


def load_workflow(data: object) -> WorkflowDefinition:
    """Validate a parsed JSON workflow definition and build its model.

    Parameters
    ----------
    data:
        The decoded JSON document.

    Returns
    -------
    The definition, with :attr:`~WorkflowDefinition.raw` holding a copy of ``data``.

    Raises
    ------
    WorkflowInvalid
        When the document breaks the schema or Tether's semantic rules. The message
        names the offending field, through node and edge ids (``nodes[2] (id 'gate').typeId:
        ...``); ``details["errors"]`` lists every problem as ``{"path", "message"}``.
    """
    if not isinstance(data, dict):
        raise _invalid(data, [((), "a workflow definition must be a JSON object")])
    try:
        workflow = WorkflowDefinition.model_validate(data)
    except ValidationError as exc:
        raise _invalid(data, _from_pydantic(exc)) from None
    problems = [*_open_object_problems(workflow), *_semantic_problems(workflow)]
    if problems:
        raise _invalid(data, problems)
    workflow._raw = copy.deepcopy(data)
    return workflow


def load_workflow_file(path: str | PathLike[str]) -> WorkflowDefinition:
    """Read, parse and validate a workflow file; error messages start with the file name."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        message = f"{file.name}: not valid JSON: {exc}"
        raise WorkflowInvalid(message, details={"errors": [{"path": "", "message": message}]}) from exc
    try:
        return load_workflow(data)
    except WorkflowInvalid as exc:
        raise WorkflowInvalid(f"{file.name}: {exc.message}", details=exc.details) from exc


def _invalid(data: object, problems: Iterable[tuple[Loc, str]]) -> WorkflowInvalid:
    errors = [{"path": _format_path(loc, data), "message": message} for loc, message in problems]
    shown = [f"{e['path']}: {e['message']}" if e["path"] else e["message"] for e in errors[:_MESSAGE_ERRORS]]
    message = "; ".join(shown)
    if len(errors) > _MESSAGE_ERRORS:
        message += f" (and {len(errors) - _MESSAGE_ERRORS} more)"
    return WorkflowInvalid(message, details={"errors": errors})


def _format_path(loc: Loc, data: object) -> str:
    """Render a location as ``nodes[2] (id 'gate').inputs.payload``, walking the raw data for ids."""
    path = ""
    cursor: object = data
    for depth, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
            item = cursor[part] if isinstance(cursor, list) and 0 <= part < len(cursor) else None
            label = _LABELS.get(str(loc[0])) if depth == 1 else None
            if label and isinstance(item, dict) and isinstance(item.get(label), str):
                path += f" ({label} {item[label]!r})"
            cursor = item
            continue
        path += (("." if path else "") + part) if _PLAIN_KEY.match(part) else f"[{json.dumps(part)}]"
        cursor = cursor.get(part) if isinstance(cursor, dict) else None
    return path


def _from_pydantic(exc: ValidationError, prefix: Loc = ()) -> list[tuple[Loc, str]]:
    return [(prefix + _without_port_tag(tuple(error["loc"])), _describe(error)) for error in exc.errors()]


def _without_port_tag(loc: Loc) -> Loc:
    """Drop the union tag pydantic puts in ``nodes[i].inputs[port].<tag>...``: not a document key."""
    if len(loc) > 4 and loc[0] == "nodes" and loc[2] == "inputs" and loc[4] in _PORT_TAGS:
        return loc[:4] + loc[5:]
    return loc


def _describe(error: Any) -> str:
    """Pydantic's wording, rephrased as the schema's constraint where it reads better."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a field the schema allows"
    if kind == "string_pattern_mismatch":
        return f"{error['input']!r} does not match {ctx.get('pattern')}"
    if kind == "literal_error":
        return f"{error['input']!r} is not one of {ctx.get('expected')}"
    if kind == "union_tag_not_found":
        return "needs a 'type' of 'static', 'expression', 'connection' or 'variable'"
    if kind == "union_tag_invalid":
        return f"type {ctx.get('tag')!r} is not one of {ctx.get('expected_tags')}"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return "must be a JSON object"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    message = str(error["msg"])
    return message.replace("Input should", "should", 1) if message.startswith("Input should") else message


def _open_object_problems(workflow: WorkflowDefinition) -> list[tuple[Loc, str]]:
    """``metadata`` and ``settings`` are open objects, but their known keys are typed."""
    problems: list[tuple[Loc, str]] = []
    for key, model in (("metadata", _Metadata), ("settings", _Settings)):
        try:
            model.model_validate(getattr(workflow, key))
        except ValidationError as exc:
            problems += _from_pydantic(exc, (key,))
    return problems


def _semantic_problems(workflow: WorkflowDefinition) -> list[tuple[Loc, str]]:
    """What the schema cannot say: uniqueness, references between parts, compilable expressions."""
    problems: list[tuple[Loc, str]] = []
    node_ids = _first_index(node.id for node in workflow.nodes)
    for i, node in enumerate(workflow.nodes):
        if node_ids[node.id] != i:
            problems.append((("nodes", i, "id"), f"duplicate node id {node.id!r} (also nodes[{node_ids[node.id]}])"))
        for port, value in node.inputs.items():
            loc: Loc = ("nodes", i, "inputs", port)
            if isinstance(value, ConnectionPort) and value.nodeId not in node_ids:
                problems.append((loc + ("nodeId",), f"no node {value.nodeId!r}"))
            elif isinstance(value, ExpressionPort):
                problems += _expression_problem(loc + ("expression",), value.expression)

    edge_ids = _first_index(edge.id for edge in workflow.edges)
    for i, edge in enumerate(workflow.edges):
        if edge_ids[edge.id] != i:
            problems.append((("edges", i, "id"), f"duplicate edge id {edge.id!r} (also edges[{edge_ids[edge.id]}])"))
        for end in ("sourceNodeId", "targetNodeId"):
            target = getattr(edge, end)
            if target not in node_ids:
                problems.append((("edges", i, end), f"no node {target!r}"))
        if edge.condition is not None:
            problems += _condition_problems(("edges", i, "condition"), edge.condition)

    names = _first_index(variable.name for variable in workflow.variables)
    for i, variable in enumerate(workflow.variables):
        if names[variable.name] != i:
            problems.append(
                (
                    ("variables", i, "name"),
                    f"duplicate variable {variable.name!r} (also variables[{names[variable.name]}])",
                )
            )
    return problems


def _first_index(keys: Iterable[str]) -> dict[str, int]:
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    return first


def _expression_problem(loc: Loc, expression: str) -> list[tuple[Loc, str]]:
    try:
        compile_check(expression)
    except InvalidInput as exc:
        return [(loc, exc.message)]
    return []


def _condition_problems(loc: Loc, condition: EdgeCondition) -> list[tuple[Loc, str]]:
    if condition.type == "expression":
        if condition.expression is None:
            return [(loc + ("expression",), "is required when type is 'expression'")]
        return _expression_problem(loc + ("expression",), condition.expression)
    if condition.left is None:
        return [(loc + ("left",), f"is required when type is {condition.type!r}")]
    problems = _expression_problem(loc + ("left",), condition.left)
    if condition.type == "regex":
        if not isinstance(condition.right, str):
            problems.append((loc + ("right",), "must be a regular expression string when type is 'regex'"))
        else:
            try:
                re.compile(condition.right)
            except re.error as exc:
                problems.append((loc + ("right",), f"invalid regular expression {condition.right!r}: {exc}"))
    return problems


# --- what the engine can run -------------------------------------------------------------------


def executability_problems(wf: WorkflowDefinition, supported_type_ids: Collection[str]) -> list[str]:
    """Say why this host cannot run a valid workflow, so it is refused before a run starts.

    Parameters
    ----------
    wf:
        A loaded definition.
    supported_type_ids:
        The node typeIds the engine implements.

    Returns
    -------
    Human-readable reasons, empty when the workflow can run: each enabled node whose
    typeId is unsupported (disabled nodes never execute, so theirs do not matter), and
    each cycle in the edge graph (the engine executes DAGs only).
    """
    problems = [
        f"node {_label(node)} has typeId {node.typeId!r}, which this host does not support"
        for node in wf.nodes
        if not node.disabled and node.typeId not in supported_type_ids
    ]
    graph = _successors(wf)
    for component in _cyclic_components(graph):
        cycle = _cycle_through(component, graph)
        text = " -> ".join(_label(wf.node(node_id)) for node_id in cycle)
        extra = [node_id for node_id in component if node_id not in cycle]
        also = f" (also involved: {', '.join(_label(wf.node(n)) for n in extra)})" if extra else ""
        problems.append(f"edges form a cycle {text}{also}; this host executes acyclic workflows only")
    return problems


def _label(node: Node) -> str:
    return f"{node.id!r} ({node.name!r})"


def _successors(wf: WorkflowDefinition) -> dict[str, list[str]]:
    graph: dict[str, list[str]] = {node.id: [] for node in wf.nodes}
    for edge in wf.edges:
        if edge.sourceNodeId in graph and edge.targetNodeId in graph:
            graph[edge.sourceNodeId].append(edge.targetNodeId)
    return graph


def _cyclic_components(graph: Mapping[str, list[str]]) -> list[list[str]]:
    """Strongly connected components that contain a cycle (Tarjan, iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    position = {node_id: i for i, node_id in enumerate(graph)}

    def visit(node_id: str) -> None:
        index[node_id] = low[node_id] = len(index)
        stack.append(node_id)
        on_stack.add(node_id)

    for root in graph:
        if root in index:
            continue
        visit(root)
        work = [(root, iter(graph[root]))]
        while work:
            current, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    visit(successor)
                    work.append((successor, iter(graph[successor])))
                    break
                if successor in on_stack:
                    low[current] = min(low[current], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[current])
                if low[current] == index[current]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == current:
                            break
                    if len(component) > 1 or current in graph[current]:
                        found.append(sorted(component, key=position.__getitem__))
    return sorted(found, key=lambda component: position[component[0]])


def _cycle_through(component: list[str], graph: Mapping[str, list[str]]) -> list[str]:
    """One concrete cycle inside a component, from its first node back to it (breadth-first)."""
    start = component[0]
    members = set(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node_id in frontier:
            for successor in graph[node_id]:
                if successor not in members:
                    continue
                if successor == start:
                    path = [node_id]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if successor not in parents:
                    parents[successor] = node_id
                    following.append(successor)
        frontier = following
    return [start, start]  # unreachable for a cyclic component


# --- run inputs ------------------------------------------------------------------------------

_JSON_TYPE_NAMES = {
    "string": "a string",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def validate_inputs(wf: WorkflowDefinition, inputs: object) -> dict[str, Any]:
    """Check a run's inputs against the declared variables and build the run variables.

    Parameters
    ----------
    wf:
        The workflow about to run.
    inputs:
        The decoded ``inputs`` object of the request.

    Returns
    -------
    Declared defaults (copied) overlaid with ``inputs``. Inputs that match no declared
    variable are kept: A2A data parts are merged into the inputs unannounced.

    Raises
    ------
    InvalidInput
        When ``inputs`` is not an object, a required variable has neither a value nor a
        default, or a value does not match its declared type (``null`` is accepted only
        for variables that are not required). Messages name the variable and never echo
        its value, which may be sensitive.
    """
    if not isinstance(inputs, dict):
        message = f"inputs must be a JSON object, got {_json_type(inputs)}"
        raise InvalidInput(message, details={"errors": [{"path": "inputs", "message": message}]})
    variables: dict[str, Any] = {v.name: copy.deepcopy(v.defaultValue) for v in wf.variables if v.has_default}
    errors: list[dict[str, str]] = []
    for variable in wf.variables:
        if variable.name not in inputs:
            if variable.required and not variable.has_default:
                errors.append({"path": f"inputs.{variable.name}", "message": f"variable {variable.name!r} is required"})
            continue
        value = inputs[variable.name]
        if value is None and not variable.required:
            continue
        if _json_type(value) != variable.type:
            errors.append(
                {
                    "path": f"inputs.{variable.name}",
                    "message": f"variable {variable.name!r} must be {_JSON_TYPE_NAMES[variable.type]}, "
                    f"got {_json_type(value)}",
                }
            )
    if errors:
        message = "; ".join(error["message"] for error in errors[:_MESSAGE_ERRORS])
        if len(errors) > _MESSAGE_ERRORS:
            message += f" (and {len(errors) - _MESSAGE_ERRORS} more)"
        raise InvalidInput(message, details={"errors": errors})
    variables.update(inputs)
    return variables
