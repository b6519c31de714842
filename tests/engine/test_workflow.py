"""Tests for tether.engine.workflow and tether.engine.validation, with the official OpenWOP schema as the oracle."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from schemas import fixtures_dir, openwop_validator

from tether.engine.expressions import compile_check, placeholders
from tether.engine.validation import executability_problems, load_workflow, load_workflow_file, validate_inputs
from tether.engine.workflow import ConnectionPort, StaticPort, VariablePort, WorkflowDefinition
from tether.errors import InvalidInput, WorkflowInvalid

Doc = dict[str, Any]


def _bundled_names() -> list[str]:
    folder = resources.files("tether") / "workflows"
    return sorted(item.name for item in folder.iterdir() if item.name.endswith(".json"))


def _bundled_path(name: str) -> Path:
    return Path(str(resources.files("tether") / "workflows" / name))


def _fixture_names() -> list[str]:
    """Listed at collection; a missing folder becomes one test that fails with the how-to."""
    try:
        return sorted(path.name for path in fixtures_dir().glob("conformance-*.json"))
    except pytest.fail.Exception:
        return ["<fixtures folder missing>"]


def _schema_valid(doc: object) -> bool:
    return bool(openwop_validator("workflow-definition").is_valid(doc))


def _node(node_id: str, type_id: str = "core.noop", **extra: Any) -> Doc:
    return {
        "id": node_id,
        "typeId": type_id,
        "name": node_id.upper(),
        "position": {"x": 0, "y": 0},
        "config": {},
        "inputs": {},
        **extra,
    }


def _base() -> Doc:
    """A valid three-node workflow; the third node is 'gate' so paths read as in the docs."""
    return {
        "id": "sample",
        "name": "Sample",
        "version": "1.0.0",
        "nodes": [
            _node("a", "core.identity", inputs={"payload": {"type": "variable", "variableName": "prompt"}}),
            _node("b", inputs={"upstream": {"type": "connection", "nodeId": "a", "outputKey": "payload"}}),
            _node("gate", "core.approvalGate"),
        ],
        "edges": [
            {"id": "e1", "sourceNodeId": "a", "targetNodeId": "b"},
            {"id": "e2", "sourceNodeId": "b", "targetNodeId": "gate", "triggerRule": "all_success"},
        ],
        "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
        "variables": [{"name": "prompt", "type": "string", "required": True}],
        "metadata": {"tags": ["test"]},
        "settings": {"timeout": 0},
    }


def _rejected(doc: object) -> WorkflowInvalid:
    with pytest.raises(WorkflowInvalid) as info:
        load_workflow(doc)
    return info.value


# --- documents that must load ----------------------------------------------------------------


def test_base_document_is_valid_for_both() -> None:
    assert _schema_valid(_base())
    load_workflow(_base())


@pytest.mark.parametrize("name", _bundled_names())
def test_bundled_workflow_loads_and_matches_official_schema(name: str) -> None:
    workflow = load_workflow_file(_bundled_path(name))
    openwop_validator("workflow-definition").validate(workflow.raw)
    assert workflow.id == name.removesuffix(".json")
    assert workflow.name and workflow.description
    assert executability_problems(workflow, {node.typeId for node in workflow.nodes}) == []
    for node in workflow.nodes:
        if node.typeId == "vendor.tether.template":
            for expression in placeholders(node.config):
                compile_check(expression)


def test_bundled_set_is_complete() -> None:
    assert set(_bundled_names()) >= {
        "echo.json",
        "multi-step.json",
        "approval-gated.json",
        "clarification-gated.json",
        "shape.json",
    }


def test_echo_workflow_shape() -> None:
    echo = load_workflow_file(_bundled_path("echo.json"))
    node = echo.node("echo")
    assert node.typeId == "core.identity"
    assert node.outputRole == "primary"
    assert node.inputs["payload"] == VariablePort(type="variable", variableName="prompt")
    assert node.inputs["message"] == VariablePort(type="variable", variableName="message")
    # neither is required: a message of files alone is echoed too (issue 26)
    assert [(v.name, v.type, v.required) for v in echo.variables] == [
        ("prompt", "string", False),
        ("message", "object", False),
    ]
    assert echo.metadata["tags"] == ["a2a"]
    assert echo.description.startswith("Returns what it is given")


def test_approval_gated_routes_rejection_over_any_failed() -> None:
    workflow = load_workflow_file(_bundled_path("approval-gated.json"))
    rules = {edge.targetNodeId: edge.triggerRule for edge in workflow.outgoing("gate")}
    assert rules == {"publish": "all_success", "on-reject": "any_failed"}
    assert workflow.node("gate").config["actions"] == ["accept", "reject", "refine", "edit", "ask"]


@pytest.mark.parametrize("name", _fixture_names())
def test_conformance_fixture_loads_and_matches_official_schema(name: str) -> None:
    path = fixtures_dir() / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    openwop_validator("workflow-definition").validate(raw)
    workflow = load_workflow_file(path)
    assert workflow.raw == raw
    assert workflow.id == path.stem


def test_fixture_folder_is_not_empty() -> None:
    assert _fixture_names() and _fixture_names() != ["<fixtures folder missing>"]


# --- documents both the schema and Tether reject ------------------------------------------------


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return mutate


def _delete(path: tuple[str | int, ...]) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return mutate


SCHEMA_VIOLATIONS = [
    pytest.param(
        _set(("nodes", 2, "typeId"), "Core.Approval"),
        ["nodes[2] (id 'gate').typeId", "'Core.Approval'"],
        id="bad-typeId-pattern",
    ),
    pytest.param(_delete(("nodes", 1, "name")), ["nodes[1] (id 'b').name: is required"], id="node-without-name"),
    pytest.param(
        _set(("owner",), "someone"), ["owner: is not a field the schema allows"], id="unknown-top-level-field"
    ),
    pytest.param(
        _set(("edges", 0, "triggerRule"), "sometimes"),
        ["edges[0] (id 'e1').triggerRule", "'sometimes'"],
        id="bad-triggerRule",
    ),
    pytest.param(_set(("id",), "Sample"), ["id: 'Sample' does not match"], id="bad-workflow-id"),
    pytest.param(_set(("nodes",), []), ["nodes:"], id="no-nodes"),
    pytest.param(_set(("nodes", 0, "notes"), None), ["nodes[0] (id 'a').notes: must not be null"], id="null-optional"),
    pytest.param(_set(("nodes", 0, "disabled"), "true"), ["nodes[0] (id 'a').disabled"], id="string-for-boolean"),
    pytest.param(_set(("nodes", 0, "color"), "red"), ["nodes[0] (id 'a').color"], id="unknown-node-field"),
    pytest.param(_delete(("nodes", 0, "position", "y")), ["nodes[0] (id 'a').position"], id="position-without-y"),
    pytest.param(
        _set(("nodes", 0, "inputs", "payload"), {"type": "variable"}),
        ["nodes[0] (id 'a').inputs.payload.variableName: is required"],
        id="port-missing-field",
    ),
    pytest.param(
        _set(("nodes", 0, "inputs", "payload"), {"type": "magic", "value": 1}),
        ["nodes[0] (id 'a').inputs.payload: type 'magic'"],
        id="port-bad-type",
    ),
    pytest.param(
        _set(("nodes", 0, "inputs", "payload"), {"type": "static", "value": 1, "extra": 2}),
        ["nodes[0] (id 'a').inputs.payload.extra"],
        id="port-unknown-field",
    ),
    pytest.param(
        _set(("variables", 0, "type"), "integer"),
        ["variables[0] (name 'prompt').type", "'integer'"],
        id="bad-variable-type",
    ),
    pytest.param(_set(("triggers", 0, "type"), "cron"), ["triggers[0] (id 'manual').type"], id="bad-trigger-type"),
    pytest.param(_set(("settings", "timeout"), -1), ["settings.timeout"], id="negative-timeout"),
    pytest.param(_set(("metadata", "tags"), ["ok", ""]), ["metadata.tags[1]"], id="empty-tag"),
    pytest.param(_set(("createdAt",), "yesterday"), ["createdAt: 'yesterday' is not an RFC 3339"], id="bad-date-time"),
]


@pytest.mark.parametrize(("mutate", "fragments"), SCHEMA_VIOLATIONS)
def test_schema_violations_are_rejected_by_both(mutate: Callable[[Doc], None], fragments: list[str]) -> None:
    doc = _base()
    mutate(doc)
    # The oracle's format checker only covers date-time with an optional extra installed;
    # the bad-date-time case checks that Tether does not depend on it.
    if doc.get("createdAt") != "yesterday":
        assert not _schema_valid(doc), "the official schema accepts this; the test case is wrong"
    error = _rejected(doc)
    for fragment in fragments:
        assert fragment in error.message
    assert error.details is not None and error.details["errors"]
    assert all(set(entry) == {"path", "message"} for entry in error.details["errors"])


@pytest.mark.parametrize("value", [[], "x", None, 3])
def test_non_object_is_rejected(value: object) -> None:
    assert "must be a JSON object" in _rejected(value).message


# --- documents only Tether rejects -------------------------------------------------------------


SEMANTIC_VIOLATIONS = [
    pytest.param(
        _set(("edges", 0, "targetNodeId"), "missing"),
        "edges[0] (id 'e1').targetNodeId: no node 'missing'",
        id="edge-to-unknown-node",
    ),
    pytest.param(
        _set(("edges", 1, "sourceNodeId"), "ghost"),
        "edges[1] (id 'e2').sourceNodeId: no node 'ghost'",
        id="edge-from-unknown-node",
    ),
    pytest.param(
        _set(("nodes", 2, "id"), "a"),
        "nodes[2] (id 'a').id: duplicate node id 'a' (also nodes[0])",
        id="duplicate-node-id",
    ),
    pytest.param(
        _set(("edges", 1, "id"), "e1"),
        "edges[1] (id 'e1').id: duplicate edge id 'e1' (also edges[0])",
        id="duplicate-edge-id",
    ),
    pytest.param(
        _set(("nodes", 1, "inputs", "upstream", "nodeId"), "nowhere"),
        "nodes[1] (id 'b').inputs.upstream.nodeId: no node 'nowhere'",
        id="connection-to-unknown-node",
    ),
    pytest.param(
        lambda doc: doc["variables"].append({"name": "prompt", "type": "number"}),
        "variables[1] (name 'prompt').name: duplicate variable 'prompt'",
        id="duplicate-variable",
    ),
    pytest.param(
        _set(("nodes", 2, "inputs", "n"), {"type": "expression", "expression": "variables.["}),
        "nodes[2] (id 'gate').inputs.n.expression: invalid expression 'variables.['",
        id="expression-port-does-not-compile",
    ),
    pytest.param(
        _set(("nodes", 2, "inputs", "n"), {"type": "expression", "expression": "lenght(variables.prompt)"}),
        "nodes[2] (id 'gate').inputs.n.expression: invalid expression 'lenght(variables.prompt)': "
        "unknown function lenght()",
        id="expression-port-unknown-function",
    ),
    pytest.param(
        _set(("edges", 0, "condition"), {"type": "expression", "expression": "a ||"}),
        "edges[0] (id 'e1').condition.expression: invalid expression 'a ||'",
        id="condition-expression-does-not-compile",
    ),
    pytest.param(
        _set(("edges", 0, "condition"), {"type": "equals", "right": 1}),
        "edges[0] (id 'e1').condition.left: is required when type is 'equals'",
        id="condition-without-left",
    ),
    pytest.param(
        _set(("edges", 0, "condition"), {"type": "expression"}),
        "edges[0] (id 'e1').condition.expression: is required",
        id="expression-condition-without-expression",
    ),
    pytest.param(
        _set(("edges", 0, "condition"), {"type": "regex", "left": "variables.prompt", "right": "("}),
        "edges[0] (id 'e1').condition.right: invalid regular expression '('",
        id="condition-bad-regex",
    ),
]


@pytest.mark.parametrize(("mutate", "fragment"), SEMANTIC_VIOLATIONS)
def test_semantic_violations_only_tether_rejects(mutate: Callable[[Doc], None], fragment: str) -> None:
    doc = _base()
    mutate(doc)
    assert _schema_valid(doc), "the official schema rejects this; it belongs with the schema cases"
    error = _rejected(doc)
    assert fragment in error.message
    assert error.details is not None
    assert any(fragment.startswith(entry["path"] + ": ") for entry in error.details["errors"])


def test_message_summarises_many_errors_and_details_list_all() -> None:
    doc = _base()
    for i, node in enumerate(doc["nodes"]):
        node["typeId"] = f"Bad{i}"
    doc["owner"] = "x"
    error = _rejected(doc)
    assert error.details is not None
    assert len(error.details["errors"]) == 4
    assert "(and 1 more)" in error.message


def test_workflow_invalid_is_invalid_input() -> None:
    assert isinstance(_rejected({}), InvalidInput)


def test_load_workflow_file_prefixes_the_file_name(tmp_path: Path) -> None:
    doc = _base()
    doc["edges"][0]["targetNodeId"] = "missing"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(WorkflowInvalid) as info:
        load_workflow_file(path)
    assert info.value.message.startswith("broken.json: edges[0] (id 'e1').targetNodeId: no node 'missing'")
    assert info.value.details is not None
    assert info.value.details["errors"][0]["path"] == "edges[0] (id 'e1').targetNodeId"


def test_load_workflow_file_reports_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "garbled.json"
    path.write_text("{nope", encoding="utf-8")
    with pytest.raises(WorkflowInvalid, match=r"^garbled\.json: not valid JSON"):
        load_workflow_file(path)


# --- the model --------------------------------------------------------------------------------


def test_raw_is_a_verbatim_copy() -> None:
    doc = _base()
    workflow = load_workflow(doc)
    assert workflow.raw == doc
    doc["name"] = "changed"
    assert workflow.raw["name"] == "Sample"


def test_indexes_and_defaults() -> None:
    workflow = load_workflow(_base())
    assert isinstance(workflow, WorkflowDefinition)
    assert workflow.node("gate").typeId == "core.approvalGate"
    assert [edge.id for edge in workflow.incoming("b")] == ["e1"]
    assert [edge.id for edge in workflow.outgoing("b")] == ["e2"]
    assert workflow.incoming("a") == [] and workflow.outgoing("gate") == []
    assert workflow.variable_names == ("prompt",)
    edge = workflow.edges[0]
    assert (edge.sourceOutput, edge.targetInput, edge.triggerRule, edge.condition) == (
        "output",
        "input",
        "all_success",
        None,
    )
    upstream = workflow.node("b").inputs["upstream"]
    assert isinstance(upstream, ConnectionPort) and upstream.optional is False
    with pytest.raises(KeyError, match="nope"):
        workflow.node("nope")
    with pytest.raises(KeyError):
        workflow.incoming("nope")


def test_optional_schema_fields_are_kept() -> None:
    doc = _base()
    doc.update(
        description="d",
        type="demo",
        isActive=True,
        status="draft",
        tenantId="t",
        scopeId="s",
        slug="sample-1",
        groups=[
            {"id": "g", "name": "G", "nodeIds": ["a"], "position": {"x": 0, "y": 0}, "size": {"width": 1, "height": 1}}
        ],
        channels={"log": {"reducer": "append"}},
        configurableSchema={"type": "object"},
        defaults={"promptRefs": {}},
        acceptsInheritedArtifacts=[{}],
        createdAt="2024-01-02T03:04:05Z",
        updatedAt="2024-01-02T03:04:05.5+02:00",
    )
    doc["nodes"][0].update(
        credentialsRef="cred",
        settings={"retries": 1},
        outputRole="secondary",
        disabled=True,
        notes="n",
        groupId="g",
        agent={"agentId": "core.chat"},
        envelopeContract={},
        artifactType="doc",
        cardType="card",
        outputSensitivity={"payload": True},
    )
    doc["edges"][0].update(label="next", condition={"type": "truthy", "left": "nodes.a.payload", "right": None})
    doc["variables"][0].update(description="p", defaultValue=None, sensitive=True, format="email")
    doc["triggers"][0].update(name="Manual", description="", config={}, nodeId="a", eventType="x")
    doc["metadata"].update(
        createdBy="me", complianceClass="pii", complianceConfig={"maskingMode": "hash", "x": 1}, other=1
    )
    doc["settings"].update(maxRetries=2, logLevel="warn", maxLoopbackIterations=3, custom=True)
    assert _schema_valid(doc)
    workflow = load_workflow(doc)
    assert workflow.channels == {"log": {"reducer": "append"}}
    assert workflow.node("a").outputSensitivity == {"payload": True}
    assert workflow.edges[0].condition is not None and workflow.edges[0].condition.type == "truthy"
    assert workflow.settings["custom"] is True


def test_static_null_and_variable_default_presence() -> None:
    doc = _base()
    doc["nodes"][2]["inputs"]["fixed"] = {"type": "static", "value": None}
    doc["variables"] += [
        {"name": "explicit", "type": "string", "defaultValue": None},
        {"name": "absent", "type": "string"},
    ]
    workflow = load_workflow(doc)
    assert workflow.node("gate").inputs["fixed"] == StaticPort(type="static", value=None)
    by_name = {variable.name: variable for variable in workflow.variables}
    assert by_name["explicit"].has_default and by_name["explicit"].defaultValue is None
    assert not by_name["absent"].has_default


def test_long_node_ids_are_not_truncated() -> None:
    doc = _base()
    long_id = "chain_" + "x" * 500
    doc["nodes"][2]["id"] = long_id
    doc["edges"][1]["targetNodeId"] = long_id
    assert load_workflow(doc).node(long_id).id == long_id


# --- executability --------------------------------------------------------------------------

SUPPORTED = {"core.noop", "core.identity", "core.delay", "core.approvalGate", "core.clarificationGate"}


def test_cycle_in_loopback_fixture_is_reported_with_node_names() -> None:
    workflow = load_workflow_file(fixtures_dir() / "conformance-approval-reject-loopback.json")
    problems = executability_problems(workflow, SUPPORTED)
    assert len(problems) == 1
    assert "cycle" in problems[0]
    assert "'gate' ('Approval Gate')" in problems[0]
    assert "'revise' ('Revise')" in problems[0]
    assert "'start'" not in problems[0]


def test_unknown_type_id_is_reported() -> None:
    doc = _base()
    doc["nodes"][1]["typeId"] = "vendor.acme.magic"
    problems = executability_problems(load_workflow(doc), SUPPORTED)
    assert problems == ["node 'b' ('B') has typeId 'vendor.acme.magic', which this host does not support"]


def test_disabled_nodes_need_no_support() -> None:
    doc = _base()
    doc["nodes"][1].update(typeId="vendor.acme.magic", disabled=True)
    assert executability_problems(load_workflow(doc), SUPPORTED) == []


def test_self_loop_and_larger_component() -> None:
    doc = _base()
    doc["edges"] += [
        {"id": "loop", "sourceNodeId": "a", "targetNodeId": "a"},
        {"id": "back", "sourceNodeId": "gate", "targetNodeId": "b"},
    ]
    problems = executability_problems(load_workflow(doc), SUPPORTED)
    assert len(problems) == 2
    assert "'a' ('A') -> 'a' ('A')" in problems[0]
    assert "'b' ('B') -> 'gate' ('GATE') -> 'b' ('B')" in problems[1]


def test_acyclic_fan_out_fan_in_is_fine() -> None:
    doc = _base()
    doc["nodes"].append(_node("d"))
    doc["edges"] += [
        {"id": "e3", "sourceNodeId": "a", "targetNodeId": "d"},
        {"id": "e4", "sourceNodeId": "d", "targetNodeId": "gate"},
    ]
    assert executability_problems(load_workflow(doc), SUPPORTED) == []


# --- run inputs -------------------------------------------------------------------------------


def _typed_workflow() -> WorkflowDefinition:
    doc = _base()
    doc["variables"] = [
        {"name": "prompt", "type": "string", "required": True},
        {"name": "count", "type": "number", "defaultValue": 3},
        {"name": "flag", "type": "boolean"},
        {"name": "options", "type": "object", "defaultValue": {"deep": [1]}},
        {"name": "items", "type": "array"},
        {"name": "secret", "type": "string", "sensitive": True},
        {"name": "mode", "type": "string", "required": True, "defaultValue": "fast"},
    ]
    return load_workflow(doc)


def test_inputs_overlay_defaults_and_keep_extras() -> None:
    workflow = _typed_workflow()
    variables = validate_inputs(workflow, {"prompt": "hi", "count": 2.5, "extra": {"from": "a2a"}})
    assert variables == {
        "prompt": "hi",
        "count": 2.5,
        "options": {"deep": [1]},
        "mode": "fast",
        "extra": {"from": "a2a"},
    }


def test_defaults_are_copied_per_run() -> None:
    workflow = _typed_workflow()
    first = validate_inputs(workflow, {"prompt": "x"})
    first["options"]["deep"].append(2)
    assert validate_inputs(workflow, {"prompt": "y"})["options"] == {"deep": [1]}


def test_missing_required_variable() -> None:
    with pytest.raises(InvalidInput) as info:
        validate_inputs(_typed_workflow(), {})
    assert info.value.message == "variable 'prompt' is required"
    assert info.value.details == {"errors": [{"path": "inputs.prompt", "message": "variable 'prompt' is required"}]}


@pytest.mark.parametrize(
    ("name", "value", "ok"),
    [
        ("count", 1, True),
        ("count", 1.5, True),
        ("count", True, False),
        ("count", "1", False),
        ("flag", False, True),
        ("flag", 0, False),
        ("options", {}, True),
        ("options", [], False),
        ("items", [1, "a"], True),
        ("items", {}, False),
        ("prompt", 5, False),
        ("prompt", None, False),
        ("flag", None, True),
    ],
)
def test_input_types(name: str, value: Any, ok: bool) -> None:
    inputs = {"prompt": "p", name: value}
    if ok:
        assert validate_inputs(_typed_workflow(), inputs)[name] == value
    else:
        with pytest.raises(InvalidInput, match=f"variable '{name}' must be"):
            validate_inputs(_typed_workflow(), inputs)


def test_type_errors_do_not_echo_sensitive_values() -> None:
    with pytest.raises(InvalidInput) as info:
        validate_inputs(_typed_workflow(), {"prompt": "p", "secret": 123456789})
    assert info.value.message == "variable 'secret' must be a string, got number"
    assert "123456789" not in json.dumps(info.value.details)


def test_all_input_errors_are_listed() -> None:
    with pytest.raises(InvalidInput) as info:
        validate_inputs(_typed_workflow(), {"count": "x", "flag": "y"})
    assert info.value.details is not None
    assert [e["path"] for e in info.value.details["errors"]] == ["inputs.prompt", "inputs.count", "inputs.flag"]


@pytest.mark.parametrize("inputs", [None, [], "text", 1])
def test_inputs_must_be_an_object(inputs: object) -> None:
    with pytest.raises(InvalidInput, match="inputs must be a JSON object"):
        validate_inputs(_typed_workflow(), inputs)


def test_inputs_are_not_mutated() -> None:
    inputs = {"prompt": "p"}
    before = copy.deepcopy(inputs)
    validate_inputs(_typed_workflow(), inputs)
    assert inputs == before
