"""``/.well-known/openwop``: what this host serves, computed from what is really mounted."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from tether import __version__
from tether.http.openapi import answer
from tether.http.responses import json_response
from tether.openwop.surface import RestSurface, rest_of

router = APIRouter(tags=["discovery"])


def discovery_document(rest: RestSurface) -> dict[str, Any]:
    settings = rest.settings
    return {
        "protocolVersion": "1.0",
        "implementation": {"name": "tether", "version": __version__, "vendor": "tether"},
        "supportedEnvelopes": ["clarification.request"],
        "schemaVersions": {"clarification.request": 1},
        "limits": {
            "clarificationRounds": 3,
            "schemaRounds": 2,
            "envelopesPerTurn": 5,
            "maxRequestBodyBytes": settings.max_body_bytes,
        },
        "supportedTransports": ["rest", *rest.transports],
        "engineVersion": 1,
        "eventLogSchemaVersion": 1,
        "fixtures": rest.registry.executable_fixtures(),
        "webhooks": {"supported": True, "signatureAlgorithms": ["v1"]},
        # how long a finished run (and its A2A task) stays readable; RFC 0100 UQ1: task retention = run retention
        "retention": {"runs": {"windowSeconds": settings.task_retention or None, "purgeOnDemand": True}},
        **(rest.families or {}),
    }


@router.get("/.well-known/openwop", responses=answer(200, "The discovery document."))
async def discovery(request: Request) -> Response:
    """Public: the capability families at the document root, each flag honest."""
    return json_response(discovery_document(rest_of(request)), headers={"Cache-Control": "public, max-age=60"})
