"""Workflows this host can run."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from tether.http.openapi import AUTHENTICATED, answer, refusals
from tether.http.requests import require
from tether.http.responses import json_response
from tether.openwop.models import WorkflowList
from tether.openwop.surface import rest_of
from tether.types import Principal

router = APIRouter(tags=["workflows"])


@router.get("/v1/workflows", response_model=WorkflowList, responses=refusals(*AUTHENTICATED))
async def list_workflows(request: Request, principal: Principal = Depends(require("manifest:read"))) -> Response:
    """Every loaded workflow, and whether this engine can execute it."""
    entries = rest_of(request).registry.entries()
    return json_response(
        {
            "workflows": [
                {
                    "id": e.workflow.id,
                    "name": e.workflow.name,
                    "version": e.workflow.version,
                    "description": e.workflow.description,
                    "source": e.source,
                    "executable": e.executable,
                    "problems": list(e.problems),
                }
                for e in entries
            ]
        }
    )


@router.get(
    "/v1/workflows/{workflow_id}",
    responses={**answer(200, "The definition, as loaded."), **refusals(*AUTHENTICATED, 404)},
)
async def get_workflow(
    request: Request, workflow_id: str, principal: Principal = Depends(require("manifest:read"))
) -> Response:
    """The definition, verbatim as it was loaded."""
    return json_response(rest_of(request).registry.get(workflow_id).workflow.raw)
