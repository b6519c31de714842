"""What a v2 client reads about the host besides its runs: a workflow's definition, the v2 OpenAPI document.

Both answer under major 2 what ``/v1`` answers under major 1 (the pairing rule: an operation
served under ``/v1`` answers at major 2 too, or major 2 may not be advertised).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from tether import __version__
from tether.http.openapi import AUTHENTICATED, answer, document_of, refusals
from tether.http.requests import require
from tether.http.responses import json_response
from tether.openwop.surface import rest_of
from tether.types import Principal

__all__ = ["catalog_router"]


def catalog_router(documented: Iterable[APIRouter]) -> APIRouter:
    """The catalog routes; ``/openapi.json`` documents ``documented`` (the v2 routers) and itself."""
    router = APIRouter(tags=["catalog (v2)"])
    built: dict[str, Any] = {}

    @router.get(
        "/workflows/{workflow_id}", responses={**answer(200, "The definition."), **refusals(*AUTHENTICATED, 404)}
    )
    async def get_workflow(
        request: Request, workflow_id: str, principal: Principal = Depends(require("manifest:read"))
    ) -> Response:
        """The definition, verbatim as it was loaded."""
        return json_response(rest_of(request).registry.get(workflow_id).workflow.raw)

    @router.get("/openapi.json", responses=answer(200, "This document."))
    async def openapi_document() -> Response:
        """The OpenAPI document of the operations this host serves at major 2 (no key needed)."""
        if not built:
            routes = [route for r in (*documented, router) for route in r.routes]
            built.update(document_of("Tether (OpenWOP v2)", __version__, "The OpenWOP major 2 surface.", routes))
        return json_response(built)

    return router
