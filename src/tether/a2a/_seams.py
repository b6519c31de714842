"""Test seams (``tether serve --enable-test-seams`` only): the conformance suite's routes, the hand-off's pause.

They are served twice: under ``/v1/host/sample/a2a/tasks`` for the v1 suite, and under
``/conformance/seams/sample/a2a/tasks`` (OpenWOP's v2 seams profile, which also reads the
durable record there, in its v2 form: ``runId`` bound to its tenant).

``start`` parks a real run at an approval gate, exactly as an A2A client's task would
be, so the suite can read its durable record. ``push-config`` checks a push URL with
the egress guard *before* it looks the task up, as the suite's SSRF legs require
(a refusal is a 400, never a 404). The read seam, ``GET …/tasks/{taskId}``, is not a
test seam: it is always served, beside ``/v1/a2a/tasks/{taskId}``.

``handoff_pause`` (``--test-handoff-pause-file``) stops every hand-off between its send and
its record, so that a crash test can kill the host exactly there.

Private to the package: the host mounts them through :func:`tether.a2a.routes.seams_router`
and takes the pause through :func:`tether.a2a.routes.handoff_pause`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from tether.a2a.errors import InvalidParams
from tether.a2a.projection import INTERRUPTED, TERMINAL, task_state
from tether.a2a.push import PushConfigInput, check_push_url, push_record, seal_config
from tether.a2a.surface import a2a_of
from tether.a2a.tasks import A2A_TRANSPORT, a2a_metadata
from tether.egress.guard import EgressGuard, EgressPolicy, EgressRefused
from tether.errors import InvalidInput, NotFound
from tether.http.requests import json_body, json_object, require
from tether.http.responses import json_response
from tether.ids import new_id
from tether.settings import Settings
from tether.types import Principal

__all__ = ["SCENARIO_WORKFLOWS", "absent_router", "handoff_pause", "router"]

SEAMS = "/v1/host/sample/a2a/tasks"
#: where the v2 seams profile (``openwop-conformance-seams-v2``) puts the same seams
V2_SEAMS = "/conformance/seams/sample/a2a/tasks"
#: scenario → the bundled workflow that plays it and its inputs
SCENARIO_WORKFLOWS: dict[str, tuple[str, dict[str, Any]]] = {
    "paused-at-approval": ("approval-gated", {"prompt": "a draft parked at an approval gate by the conformance seam"}),
}
_FINGERPRINT_MAX = 32

router = APIRouter(tags=["test seams"], include_in_schema=False)
#: mounted instead of ``router`` when the seams are off: a plain 404, as the suite expects
#: of an unmounted seam (the read route shares the path, which would otherwise make it 405)
absent_router = APIRouter(include_in_schema=False)


@absent_router.post(f"{SEAMS}/{{seam}}")
async def seam_absent(seam: str) -> Response:
    """Say why the seam is missing instead of a bare 405 from the neighbouring read route."""
    raise NotFound(
        f"no test seam {seam!r}: the conformance seams are mounted only with 'tether serve --enable-test-seams'"
    )


@router.post(f"{SEAMS}/start")
@router.post(f"{V2_SEAMS}/start")
async def start_task(request: Request, principal: Principal = Depends(require("runs:create"))) -> Response:
    """Start a real A2A-backed run and answer once it waits (201 ``{taskId}``)."""
    a2a = a2a_of(request)
    body = json_object(await json_body(request, required=False) or {})
    scenario = body.get("scenario", "paused-at-approval")
    if scenario not in SCENARIO_WORKFLOWS:
        raise InvalidInput(
            f"unknown scenario {scenario!r}; this host plays {', '.join(SCENARIO_WORKFLOWS)}",
            details={"field": "scenario"},
        )
    workflow_id, inputs = SCENARIO_WORKFLOWS[scenario]
    context_id = new_id("ctx_")
    created = await a2a.engine.create_run(
        principal,
        workflow_id,
        inputs,
        tags=[f"a2a:{context_id}", f"seam:{scenario}"],
        metadata=a2a_metadata(context_id, None, workflow_id),
        transport=A2A_TRANSPORT,
    )
    run_id = created.run.run_id
    await a2a.engine.wait_for(
        run_id, lambda r: task_state(r.status) in TERMINAL | INTERRUPTED, a2a.settings.a2a_request_timeout
    )
    return json_response({"taskId": run_id}, 201)


@router.post(f"{SEAMS}/push-config")
@router.post(f"{V2_SEAMS}/push-config")
async def push_config(request: Request, principal: Principal = Depends(require("runs:create"))) -> Response:
    """Validate a push URL with the egress guard, then look the task up (in that order)."""
    body = json_object(await json_body(request))
    task_id, url, fingerprint = body.get("taskId"), body.get("url"), body.get("tokenFingerprint")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidInput("taskId must be a non-empty string", details={"field": "taskId"})
    if not isinstance(url, str) or not url:
        raise InvalidInput("url must be a non-empty string", details={"field": "url"})
    if fingerprint is not None and (not isinstance(fingerprint, str) or len(fingerprint) > _FINGERPRINT_MAX):
        raise InvalidInput(
            f"tokenFingerprint must be a digest of at most {_FINGERPRINT_MAX} characters, never the token",
            details={"field": "tokenFingerprint"},
        )
    try:
        EgressGuard(EgressPolicy()).check_url(url)  # the production posture: no operator relaxation
    except EgressRefused as refused:
        raise InvalidInput(
            refused.message, code="a2a_push_egress_denied", details={"url": url, "arm": refused.arm}
        ) from refused
    a2a = a2a_of(request)
    try:
        await check_push_url(a2a, url)
    except InvalidParams as refused:
        raise InvalidInput(refused.message, code="a2a_push_egress_denied", details={"url": url}) from refused
    record = await a2a.store.get_task(task_id, principal.tenant)
    if record is None:
        raise NotFound(f"no A2A task {task_id!r}", details={"taskId": task_id})
    row = seal_config(a2a, task_id, principal.tenant, PushConfigInput(url=url), "0.3")
    row.token_fingerprint = fingerprint
    await a2a.store.put_push_config(row)
    return json_response(push_record(record.record, await a2a.store.list_push_configs(task_id)))


@router.get(f"{V2_SEAMS}/{{task_id:path}}")
async def get_task_state_v2(
    task_id: str, request: Request, principal: Principal = Depends(require("runs:read"))
) -> Response:
    """The persisted A2ATaskState as OpenWOP v2 reads it: ``runId`` bound (``<tenant>/<run id>``).

    The task may be named by its id or by the bound run id (``%2F`` or ``~2F`` for the
    ``/``); a task of another tenant is answered as an unknown one.
    """
    tenant, slash, opaque = task_id.replace("~2F", "/").replace("~2f", "/").rpartition("/")
    if slash and tenant != principal.tenant:
        raise NotFound(f"no A2A task {task_id!r}", details={"taskId": task_id})
    store = a2a_of(request).store
    record = await store.get_task(opaque, principal.tenant)
    if record is None:
        raise NotFound(f"no A2A task {task_id!r}", details={"taskId": task_id})
    state = push_record(record.record, await store.list_push_configs(opaque))
    state["runId"] = f"{record.tenant}/{record.record['runId']}"  # bound, as tether.openwop.v2.ids.bind spells it
    return json_response(state)


def handoff_pause(settings: Settings) -> Callable[[], Awaitable[None]] | None:
    """What a hand-off awaits between its send and its record: with the seams on and
    ``--test-handoff-pause-file``, touch that file and wait until the test kills the host."""
    marker = settings.test_handoff_pause_file
    if not settings.enable_test_seams or marker is None:
        return None

    async def pause() -> None:
        marker.touch()
        await asyncio.Event().wait()  # until the test kills the host

    return pause
