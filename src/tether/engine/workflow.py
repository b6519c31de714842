"""Tether's model of an OpenWOP workflow definition: what the scheduler and the node types read.

The models follow the official ``workflow-definition.schema.json`` (JSON Schema 2020-12):
every object the schema closes is closed here too, values are checked strictly (no
``"true"`` for ``true``), and fields the engine does not interpret are kept, loosely
typed, so a definition round-trips.

Build definitions with :func:`tether.engine.validation.load_workflow`, which also rejects
what the schema cannot express (duplicate ids, edges and ports that point at missing nodes,
expressions that do not compile); a model validated directly skips those checks and has an
empty :attr:`WorkflowDefinition.raw`.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
)

__all__ = [
    "ConnectionPort",
    "DateTime",
    "Edge",
    "EdgeCondition",
    "ExpressionPort",
    "Node",
    "PortValue",
    "StaticPort",
    "Trigger",
    "Variable",
    "VariablePort",
    "WorkflowDefinition",
]

TYPE_ID_PATTERN = r"^[a-z][a-zA-Z0-9._-]*$"
WORKFLOW_ID_PATTERN = r"^[a-z][a-z0-9_-]*$"


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _date_time(value: str) -> str:
    """The schema's ``format: date-time``: RFC 3339, with a real calendar date and time."""
    if not _RFC3339.match(value):
        raise ValueError(f"{value!r} is not an RFC 3339 date-time")
    try:
        datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an RFC 3339 date-time") from exc
    return value


DateTime = Annotated[str, AfterValidator(_date_time)]


class _Closed(BaseModel):
    """Base of the schema's closed objects: unknown keys and JSON type coercion are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _NullFree(_Closed):
    """A closed object whose optional fields are absent-or-typed, never JSON null.

    Python spells "absent" as ``None``, so without this an explicit ``null`` would slip
    through where the schema rejects it. (Port models do without: every field they
    have is required or non-optional, and pydantic forbids before-validators on a
    discriminator field.)
    """

    # Fields whose schema admits JSON null.
    nullable_fields: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _reject_null(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None and info.field_name not in cls.nullable_fields:
            raise ValueError("must not be null")
        return value


# --- ports --------------------------------------------------------------------------------


class StaticPort(_Closed):
    """A constant input value, any JSON."""

    type: Literal["static"]
    value: Any


class ExpressionPort(_Closed):
    """An input computed by a JMESPath expression over the engine's context."""

    type: Literal["expression"]
    expression: str = Field(min_length=1)


class ConnectionPort(_Closed):
    """An input taken from another node's output."""

    type: Literal["connection"]
    nodeId: str = Field(min_length=1)
    outputKey: str = Field(min_length=1)
    optional: bool = False


class VariablePort(_Closed):
    """An input taken from a run variable."""

    type: Literal["variable"]
    variableName: str = Field(min_length=1)
    optional: bool = False


PortValue = Annotated[
    StaticPort | ExpressionPort | ConnectionPort | VariablePort,
    Field(discriminator="type"),
]


# --- nodes, edges, triggers, variables ------------------------------------------------------


class Node(_NullFree):
    """One step of the workflow; ``config`` holds per-typeId constants, ``inputs`` its ports."""

    id: str = Field(min_length=1)  # no max length: expanded chain ids are long by design
    typeId: str = Field(min_length=1, pattern=TYPE_ID_PATTERN)
    name: str = Field(min_length=1)
    position: dict[str, Any]
    config: dict[str, Any]
    inputs: dict[str, PortValue]
    outputRole: Literal["primary", "secondary"] | None = None
    disabled: bool = False
    credentialsRef: str | None = None
    settings: dict[str, Any] | None = None
    notes: str | None = None
    groupId: str | None = None
    agent: dict[str, Any] | None = None
    envelopeContract: dict[str, Any] | None = None
    artifactType: str | None = None
    cardType: str | None = None
    outputSensitivity: dict[str, bool] | None = None

    @field_validator("position")
    @classmethod
    def _has_coordinates(cls, position: dict[str, Any]) -> dict[str, Any]:
        for axis in ("x", "y"):
            if axis not in position:
                raise ValueError(f"needs a numeric {axis!r}")
            if not _is_number(position[axis]):
                raise ValueError(f"{axis!r} must be a number")
        return position


class EdgeCondition(_NullFree):
    """When an edge may fire; ``left`` is an expression, ``right`` a literal (see expressions)."""

    nullable_fields = frozenset({"right"})

    type: Literal["expression", "equals", "notEquals", "contains", "regex", "truthy", "falsy"]
    left: str | None = None
    right: Any = None
    expression: str | None = None


class Edge(_NullFree):
    """A dependency from one node to another, gated by a trigger rule and an optional condition."""

    id: str = Field(min_length=1)
    sourceNodeId: str = Field(min_length=1)
    targetNodeId: str = Field(min_length=1)
    sourceOutput: str = "output"
    targetInput: str = "input"
    label: str | None = None
    condition: EdgeCondition | None = None
    triggerRule: Literal["all_success", "any_success", "all_complete", "none_failed", "any_failed"] = "all_success"


class Trigger(_NullFree):
    """How a run may start; Tether starts runs manually (REST or A2A) whatever is declared."""

    id: str = Field(min_length=1)
    type: Literal[
        "manual",
        "schedule",
        "webhook",
        "event",
        "artifact",
        "canvas",
        "envelope",
        "command",
        "chat-message",
        "channel-write",
    ]
    name: str | None = None
    description: str | None = None
    config: dict[str, Any] | None = None
    enabled: bool = True
    nodeId: str | None = None
    eventType: str | None = None


class Variable(_NullFree):
    """A declared run variable; inputs are checked against its type by :func:`validate_inputs`."""

    nullable_fields = frozenset({"defaultValue"})

    name: str = Field(min_length=1)
    type: Literal["string", "number", "boolean", "object", "array"]
    description: str | None = None
    required: bool = False
    defaultValue: Any = None
    sensitive: bool = False
    format: str | None = Field(default=None, min_length=1)

    @property
    def has_default(self) -> bool:
        """True when the definition declares ``defaultValue``, even as null."""
        return "defaultValue" in self.model_fields_set


# --- the definition --------------------------------------------------------------------------


class WorkflowDefinition(_NullFree):
    """A validated workflow, with edge indexes precomputed for the engine's scheduler."""

    id: str = Field(min_length=1, max_length=128, pattern=WORKFLOW_ID_PATTERN)
    name: str = Field(min_length=1, max_length=256)
    version: str = Field(min_length=1)
    nodes: list[Node] = Field(min_length=1)
    edges: list[Edge]
    triggers: list[Trigger]
    variables: list[Variable]
    metadata: dict[str, Any]
    settings: dict[str, Any]
    description: str | None = None
    type: str | None = None
    isActive: bool | None = None
    status: Literal["active", "inactive", "draft", "archived"] | None = None
    tenantId: str | None = None
    scopeId: str | None = None
    slug: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    groups: list[dict[str, Any]] | None = None
    channels: dict[str, dict[str, Any]] | None = None
    configurableSchema: dict[str, Any] | None = None
    defaults: dict[str, Any] | None = None
    acceptsInheritedArtifacts: list[dict[str, Any]] | None = None
    createdAt: DateTime | None = None
    updatedAt: DateTime | None = None

    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    # The graph's indexes, built once on first use; plain attributes after that (a private
    # attribute would cost a pydantic lookup on every scheduling step).
    @cached_property
    def nodes_by_id(self) -> dict[str, Node]:
        return {node.id: node for node in self.nodes}

    @cached_property
    def _edges_in(self) -> dict[str, tuple[Edge, ...]]:
        return self._edges_by("targetNodeId")

    @cached_property
    def _edges_out(self) -> dict[str, tuple[Edge, ...]]:
        return self._edges_by("sourceNodeId")

    def _edges_by(self, end: str) -> dict[str, tuple[Edge, ...]]:
        grouped: dict[str, list[Edge]] = {node_id: [] for node_id in self.nodes_by_id}
        for edge in self.edges:
            grouped.setdefault(getattr(edge, end), []).append(edge)
        return {key: tuple(edges) for key, edges in grouped.items()}

    @property
    def raw(self) -> dict[str, Any]:
        """The JSON this definition was loaded from, verbatim, for storing and serving back."""
        return self._raw

    @property
    def variable_names(self) -> tuple[str, ...]:
        """Declared variable names, in declaration order."""
        return tuple(variable.name for variable in self.variables)

    def node(self, node_id: str) -> Node:
        """The node with this id; KeyError if there is none."""
        try:
            return self.nodes_by_id[node_id]
        except KeyError:
            raise KeyError(f"workflow {self.id!r} has no node {node_id!r}") from None

    def incoming(self, node_id: str) -> list[Edge]:
        """Edges whose target is this node, in definition order."""
        self.node(node_id)
        return list(self._edges_in.get(node_id, ()))

    def outgoing(self, node_id: str) -> list[Edge]:
        """Edges whose source is this node, in definition order."""
        self.node(node_id)
        return list(self._edges_out.get(node_id, ()))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
