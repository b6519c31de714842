"""Request and response bodies of the REST surface (they feed the OpenAPI document)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from tether.types import RunStatus


class CreateRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workflowId: str = Field(min_length=1, max_length=128)
    inputs: dict[str, Any] = Field(default_factory=dict)
    tenantId: str | None = Field(default=None, max_length=128)
    scopeId: str | None = Field(default=None, max_length=128)
    callbackUrl: str | None = None
    configurable: dict[str, Any] | None = None
    tags: list[Annotated[str, Field(max_length=256)]] = Field(default_factory=list, max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict)


class CreateRunResponse(BaseModel):
    runId: str
    status: RunStatus
    eventsUrl: str
    statusUrl: str


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=512)


class PurgeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    before: AwareDatetime = Field(description="Purge the caller's runs that ended before this instant (with offset).")
    dryRun: bool = Field(default=False, description="Only list the runs that would go; delete nothing.")
    limit: int = Field(default=1000, ge=1, le=10_000, description="The most runs one call purges.")


class PurgeResponse(BaseModel):
    runIds: list[str]
    dryRun: bool
    more: bool = Field(description="More runs ended before that instant may be left: call again.")


class StatusResponse(BaseModel):
    runId: str
    status: RunStatus


class ResolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resumeValue: Any


class ResolveResponse(BaseModel):
    runId: str
    nodeId: str
    status: RunStatus


class ErrorEnvelope(BaseModel):
    error: str
    message: str
    details: dict[str, Any] | None = None


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorEnvelope} for code in (400, 401, 403, 404, 409, 410, 413, 415, 422)
}
