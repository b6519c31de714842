"""``/.well-known/openwop``: what this host serves, computed from what is really mounted.

One resource, two representations: the v1 document (with ``protocolVersions`` and
``preferredVersion`` beside its v1 keys) without ``OpenWOP-Version`` or with major 1, and
the closed v2 root with major 2. Each carries a strong ``ETag`` over its bytes and answers
``If-None-Match`` with ``304``; ``Vary: OpenWOP-Version`` tells caches the two apart.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from tether import __version__
from tether.auth.signing_keys import published_keys
from tether.http.openapi import answer
from tether.openwop.surface import RestSurface, rest_of
from tether.openwop.v2.discovery import Family, v2_root
from tether.openwop.v2.fork import replay_family
from tether.openwop.v2.seams import conformance_record
from tether.openwop.v2.webhooks import webhooks_family
from tether.openwop.versions import PREFERRED_VERSION, PROTOCOL_VERSIONS, major_of

router = APIRouter(tags=["discovery"])

#: the v2 root's families that the pieces serving them describe
V2_FAMILIES = {
    "webhooks": lambda rest: webhooks_family(rest.settings),
    "replay": replay_family,
    # metadata, not a family: the seams profile, advertised exactly where the seams are mounted
    "conformance": lambda rest: conformance_record(rest.settings),
}


def v2_families(rest: RestSurface) -> dict[str, Family]:
    """The families the v2 root adds to its own: this package's, then the other surfaces' records (``a2a``)."""
    given = {name: (lambda _rest, record=record: record) for name, record in (rest.v2_families or {}).items()}
    return {**V2_FAMILIES, **given}


def discovery_document(rest: RestSurface) -> dict[str, Any]:
    settings = rest.settings
    return {
        "protocolVersion": "1.0",
        # both majors, on one origin: v1 under /v1, v2 on the unversioned paths; v1 preferred through the overlap
        "protocolVersions": list(PROTOCOL_VERSIONS),
        "preferredVersion": PREFERRED_VERSION,
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
    rest = rest_of(request)
    if major_of(request.scope) == 2:
        doc = v2_root(rest, v2_families(rest))
        # the keys certification bundles are signed with: read each time, so every host of a store publishes
        # the same ones, a rotation included, the moment it is stored
        keys = await published_keys(rest.store)
        if keys:
            doc["signingKeys"] = keys
    else:
        doc = discovery_document(rest)
    body = orjson.dumps(doc)
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"Cache-Control": "public, max-age=60", "ETag": etag, "Vary": "OpenWOP-Version"}
    if etag in (request.headers.get("if-none-match") or "").replace(" ", "").split(","):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)
