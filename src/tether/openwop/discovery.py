"""``/.well-known/openwop``: what this host serves, computed from what is really mounted."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from tether import __version__
from tether.a2a.capabilities import a2a_capabilities
from tether.host import Host
from tether.openwop.deps import host_of
from tether.openwop.responses import json_response

router = APIRouter(tags=["discovery"])


def discovery_document(host: Host) -> dict[str, Any]:
    settings = host.settings
    a2a = a2a_capabilities(settings)
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
        "supportedTransports": ["rest", *a2a.transports],
        "engineVersion": 1,
        "eventLogSchemaVersion": 1,
        "fixtures": host.registry.executable_fixtures(),
        "webhooks": {"supported": True, "signatureAlgorithms": ["v1"]},
        "a2a": a2a.discovery_block(),
    }


@router.get("/.well-known/openwop")
async def discovery(request: Request) -> Response:
    """Public: the capability families at the document root, each flag honest."""
    return json_response(discovery_document(host_of(request)), headers={"Cache-Control": "public, max-age=60"})
