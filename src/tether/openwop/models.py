"""Request and response bodies of the REST surface (they feed the OpenAPI document).

Requests are parsed strictly (``strict=True``): a ``1`` is no boolean and a ``"5"`` no
integer, so a body the document calls invalid is refused, never coerced. The response
models only describe; routes render their answers themselves.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from tether import clock
from tether.types import RunStatus

#: the longest run, workflow or tenant id the host takes
ID_MAX = 128

Id = Annotated[str, Field(min_length=1, max_length=ID_MAX)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CreateRunRequest(_Request):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"workflowId": "echo", "inputs": {"prompt": "hello"}}]},
    )

    workflowId: str = Field(min_length=1, max_length=ID_MAX)
    inputs: dict[str, Any] = Field(default_factory=dict)
    tenantId: str | None = Field(default=None, max_length=ID_MAX)
    scopeId: str | None = Field(default=None, max_length=ID_MAX)
    callbackUrl: str | None = None
    configurable: dict[str, Any] | None = None
    tags: list[Annotated[str, Field(max_length=256)]] = Field(default_factory=list, max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict)


class CreateRunResponse(BaseModel):
    runId: str
    status: RunStatus
    eventsUrl: str
    statusUrl: str


class CancelRequest(_Request):
    reason: str | None = Field(default=None, max_length=512)


def _stamp_bound(value: str) -> str:
    """The instant as a stored stamp (:func:`tether.clock.stamp_bound`): compared as the instant it names."""
    return clock.stamp_bound(value)


#: a date-time as JSON carries it (``format: date-time``), held as the stored stamp it is compared with
DateTime = Annotated[str, AfterValidator(_stamp_bound), WithJsonSchema({"type": "string", "format": "date-time"})]


class PurgeRequest(_Request):
    before: DateTime = Field(description="Purge the caller's runs that ended before this instant (with offset).")
    dryRun: bool = Field(default=False, description="Only list the runs that would go; delete nothing.")
    limit: int = Field(default=1000, ge=1, le=10_000, description="The most runs one call purges.")


class PurgeResponse(BaseModel):
    runIds: list[str]
    dryRun: bool
    more: bool = Field(description="More runs ended before that instant may be left: call again.")


class StatusResponse(BaseModel):
    runId: str
    status: RunStatus


class ResolveRequest(_Request):
    resumeValue: Any


class ResolveResponse(BaseModel):
    runId: str
    nodeId: str
    status: RunStatus


class RunError(BaseModel):
    code: str
    message: str
    details: Any = None


class PendingInterrupt(BaseModel):
    """The interrupt a run waits at, with a token to answer it at ``/v1/interrupts/{token}``."""

    kind: str
    nodeId: str
    interruptId: str
    interruptToken: str
    key: str
    data: Any = None
    requestedAt: str
    timeoutMs: int | None = None
    askExchanges: list[Any] | None = None


class RunSnapshot(BaseModel):
    """A run as ``GET /v1/runs/{run_id}`` shows it (OpenWOP ``run-snapshot.schema.json``)."""

    runId: str
    workflowId: str
    status: RunStatus
    owner: dict[str, Any]
    createdAt: str
    updatedAt: str
    nodeStates: dict[str, dict[str, Any]]
    inputs: dict[str, Any] = Field(
        description="What the run was started with (a Tether addition): ``variables`` also holds what its nodes wrote."
    )
    variables: dict[str, Any]
    tags: list[str]
    metadata: dict[str, Any]
    engineVersion: str
    eventLogSchemaVersion: int
    lastSequence: int
    startedAt: str | None = None
    completedAt: str | None = None
    currentNodeId: str | None = None
    outputs: Any = None
    error: RunError | None = None
    interrupt: PendingInterrupt | None = None


class RunList(BaseModel):
    runs: list[RunSnapshot]
    nextCursor: str | None = Field(description="Pass as ``cursor`` for the next page; null on the last.")


class EventPage(BaseModel):
    """The long-poll's answer: the events after ``lastSequence``, and where the run stands."""

    events: list[dict[str, Any]]
    isComplete: bool
    isTerminal: bool
    runStatus: RunStatus
    lastEventSeq: int


class InterruptView(BaseModel):
    """What an interrupt asks, as its token's holder sees it."""

    kind: str
    key: str
    data: Any = None
    nodeId: str
    interruptId: str
    requestedAt: str
    timeoutMs: int | None = None


class WorkflowEntry(BaseModel):
    id: str
    name: str | None = None
    version: str | None = None
    description: str | None = None
    source: str
    executable: bool
    problems: list[str]


class WorkflowList(BaseModel):
    workflows: list[WorkflowEntry]


DeliveryStatus = Literal["pending", "delivered", "dead"]
