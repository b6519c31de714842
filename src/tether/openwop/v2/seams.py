"""The v2 conformance seams (``tether serve --enable-test-seams`` only): an era-2 log, a webhook receiver.

OpenWOP's seams profile ``openwop-conformance-seams-v2`` lets the suite reach what the
protocol does not expose. These two serve the RFC 0176 scenarios; the A2A task read and
the effect seams live beside the code they drive (``tether.a2a``, the effect ledger).

``POST /conformance/seams/sample/event-log/seed`` writes a run as a v1-only build would have
left it: its events in v1 spelling, stored as given (nothing translated, no era stamp, so
every v2 reader sees an era-2 run and translates it through the codemap, refusing a type it
has no row for). The run is an ordinary one: its row is the fold of its log (as every
run's is), so the store, the engine and ``:fork`` treat it like any other, and a running one
is handed to the engine at once, as a restart would. Its events are history, so no webhook
or push is fanned out for them. The body is checked whole before anything is written.

``POST /conformance/seams/sample/webhooks/receive`` runs a delivery through
:func:`tether.egress.signing.verify_webhook`, the verifier a receiver of Tether's webhooks
uses, and reports its verdict.

:func:`seams_router` is how the host mounts them; :func:`conformance_record` is the
discovery metadata that says so, present exactly when they are mounted.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from tether import clock
from tether.egress.signing import verify_webhook
from tether.engine.batch import ENGINE_VERSION
from tether.engine.state import fold
from tether.errors import InvalidInput
from tether.http.requests import json_body, parse_model, require
from tether.http.responses import json_response
from tether.ids import new_id
from tether.openwop.surface import rest_of
from tether.openwop.v2.ids import bind
from tether.settings import Settings
from tether.store.base import Commit, EventRow, RunRow
from tether.types import INT64_MAX, TERMINAL, Principal

__all__ = ["PREFIX", "SEAMS_PROFILE", "conformance_record", "seams_router"]

#: the seams profile this host serves when the seams are mounted
SEAMS_PROFILE = "openwop-conformance-seams-v2"
PREFIX = "/conformance/seams/sample"
#: events one seed may hold (one poll page: the suite reads a seeded log in one read)
SEED_EVENTS_MAX = 1000
#: a run's terminal event -> the status it leaves the run in
_TERMINAL_EVENTS = {"run.completed": "completed", "run.failed": "failed", "run.cancelled": "cancelled"}
#: what the stored log of a v2 run may name as its workflow (``ids.schema.json`` ``workflowId``)
_WORKFLOW_ID = re.compile(r"[A-Za-z0-9._~:-]{1,128}")
#: an event id (``ids.schema.json`` ``eventId``): what a ``causationId`` must be to read back as a valid event
_EVENT_ID = r"^[A-Za-z0-9._~-]{16,128}$"


class SeedEvent(BaseModel):
    """One stored event as a v1 host wrote it: its type in v1 spelling, its sequence, its payload."""

    model_config = ConfigDict(extra="forbid", strict=True)

    type: str = Field(min_length=1, max_length=128)
    sequence: int = Field(ge=0, le=INT64_MAX)
    payload: dict[str, Any]
    timestamp: str | None = Field(default=None, max_length=64)
    causationId: str | None = Field(default=None, pattern=_EVENT_ID)


class SeedLog(BaseModel):
    """``seedEra2EventLog``'s closed body (``api/seams-v2.yaml``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    eventLogSchemaVersion: Literal[2]
    status: Literal["running", "completed", "failed", "cancelled"]
    events: list[SeedEvent] = Field(min_length=1, max_length=SEED_EVENTS_MAX)


class Delivery(BaseModel):
    """``receiveWebhookDelivery``'s closed body: the secret, the headers and the raw body as received."""

    model_config = ConfigDict(extra="forbid", strict=True)

    secret: str = Field(min_length=1, max_length=1024)
    headers: dict[Annotated[str, Field(min_length=1, max_length=256)], Annotated[str, Field(max_length=8192)]] = Field(
        max_length=100
    )
    body: str


router = APIRouter(tags=["test seams (v2)"], include_in_schema=False)


def _refuse(message: str, sequence: int | None = None) -> InvalidInput:
    details: dict[str, Any] = {"field": "events"}
    if sequence is not None:
        details["sequence"] = sequence
    return InvalidInput(message, details=details)


def _checked(log: SeedLog) -> str:
    """The workflow the log runs, once the log is one a v1 host could have written; refuses anything else."""
    for index, event in enumerate(log.events):
        if event.sequence != index:
            raise _refuse(
                f"events[{index}] has sequence {event.sequence}: a log numbers its events 0, 1, 2... in order",
                event.sequence,
            )
        if event.timestamp is not None:
            try:
                clock.stamp_bound(event.timestamp)
            except ValueError as exc:
                raise _refuse(f"events[{index}].timestamp: {exc}", event.sequence) from exc
    first = log.events[0]
    workflow = first.payload.get("workflowId")
    if first.type != "run.started" or not isinstance(workflow, str) or _WORKFLOW_ID.fullmatch(workflow) is None:
        raise _refuse("a log starts with run.started at sequence 0, its payload naming the workflowId run", 0)
    if "subject" in first.payload:  # the engine would take the run for one of this era and stamp it
        raise _refuse("an era-2 run.started records no subject: subjects were recorded from era 3 on", 0)
    for event in log.events[1:]:
        if event.type == "run.started":
            raise _refuse("a run starts once: run.started may only be the first event", event.sequence)
    ended = next((e for e in log.events if e.type in _TERMINAL_EVENTS), None)
    if ended is not None and ended is not log.events[-1]:
        raise _refuse(f"nothing follows a run's terminal event ({ended.type})", ended.sequence)
    ends_as = _TERMINAL_EVENTS.get(log.events[-1].type)
    if log.status in TERMINAL and ends_as != log.status:
        raise _refuse(f"a {log.status} run's log ends with run.{log.status}: it is what readers stop at")
    if log.status == "running" and ends_as is not None:
        raise _refuse(f"a running run's log has no terminal event; this one ends with {log.events[-1].type}")
    return workflow


def _stored(run_id: str, event: SeedEvent, now: str) -> dict[str, Any]:
    """The event as a v1 build stored it: its envelope around the given type and payload, untranslated."""
    doc: dict[str, Any] = {
        "eventId": new_id("evt_"),
        "runId": run_id,
        "type": event.type,
        "payload": event.payload,
        "timestamp": event.timestamp or now,
        "sequence": event.sequence,
        "schemaVersion": 1,
        "engineVersion": ENGINE_VERSION,
    }
    if event.causationId is not None:
        doc["causationId"] = event.causationId
    return doc


def _row(run_id: str, tenant: str, workflow: str, docs: list[dict[str, Any]], log: SeedLog, now: str) -> RunRow:
    """The run row: the fold of its log (as for every run), which must come to the status the seed says."""
    try:
        state = fold(run_id, workflow, now, docs)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _refuse(f"the events do not fold into a run ({type(exc).__name__}: {exc}): check their payloads") from exc
    if state["status"] != log.status:
        raise InvalidInput(
            f"the events leave the run {state['status']}, not {log.status}: status must be what the log says",
            details={"field": "status", "folded": state["status"]},
        )
    return RunRow(run_id, tenant, workflow, log.status, len(docs) - 1, state, now, now)


@router.post(f"{PREFIX}/event-log/seed")
async def seed_event_log(request: Request, principal: Principal = Depends(require("runs:create"))) -> Response:
    """Store a run whose log is in v1 spelling, as given (201 ``{runId}``, bound); a refused body writes nothing."""
    log: SeedLog = parse_model(SeedLog, await json_body(request))
    workflow = _checked(log)
    rest = rest_of(request)
    run_id, now = new_id("run_"), clock.now_iso()
    docs = [_stored(run_id, event, now) for event in log.events]
    row = _row(run_id, principal.tenant, workflow, docs, log, now)
    events = [EventRow(run_id, doc["sequence"], orjson.dumps(doc)) for doc in docs]
    commit = Commit(run=row, events=events, expected_sequence=None)
    await rest.store.commit(commit)
    rest.feed.committed(commit)
    if not row.is_terminal:
        rest.engine.kick(run_id)  # as a restart would: the engine drives every unfinished run it finds
    return json_response({"runId": bind(principal.tenant, run_id)}, 201)


@router.post(f"{PREFIX}/webhooks/receive")
async def receive_webhook(request: Request, principal: Principal = Depends(require("webhooks:manage"))) -> Response:
    """The production verifier's verdict on one delivery (200 ``{accepted, reason?}``; a refusal is not an error)."""
    delivery: Delivery = parse_model(Delivery, await json_body(request))
    verdict = verify_webhook(delivery.secret, delivery.headers, delivery.body.encode())
    answer: dict[str, Any] = {"accepted": verdict.accepted}
    if verdict.reason is not None:
        answer["reason"] = verdict.reason
    return json_response(answer)


def seams_router(enabled: bool) -> APIRouter:
    """The v2 seams when ``enabled`` (``--enable-test-seams``), else a router that serves nothing."""
    return router if enabled else APIRouter()


def conformance_record(settings: Settings) -> dict[str, Any] | None:
    """The discovery root's ``conformance`` metadata: the seams profile, only where the seams are mounted."""
    return {"seamsProfile": SEAMS_PROFILE} if settings.enable_test_seams else None
