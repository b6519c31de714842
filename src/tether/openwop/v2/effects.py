"""The effect ledger and the effect-seam manifest at major 2: ``GET /runs/{runId}/effects``, ``GET /host/effect-seams``.

Both are read-only views of what the engine keeps (``tether.engine.effects``): the ledger of a
run, attempt by attempt, with no content; and the manifest of every outbound effect path,
each guarded. ``MANIFEST_PATH`` is the constant the ``replay`` family names as its
``effectSeamsManifest``.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from tether.build import package_digest
from tether.engine.effects import SEAMS, EffectLedger
from tether.http.openapi import AUTHENTICATED, refusals
from tether.http.requests import require
from tether.http.responses import json_response
from tether.openwop.surface import rest_of
from tether.openwop.v2.ids import bind
from tether.openwop.v2.runs import RunPath, load_run
from tether.store.base import EffectRecord
from tether.types import Principal

__all__ = ["MANIFEST_PATH", "build", "ledger_entry", "manifest", "router"]

#: where the manifest is served: the ``replay`` facet's ``effectSeamsManifest`` names exactly this path
MANIFEST_PATH: Final = "/host/effect-seams"

router = APIRouter(tags=["effects (v2)"])


def build() -> dict[str, str]:
    """The build the manifest names: the digest of this install's package files (``tether.build``)."""
    return {"kind": "artifact-sha256", "id": package_digest()}


def manifest() -> dict[str, Any]:
    """``effect-seam-manifest.schema.json``: every outbound effect path, each guarded and saying by what."""
    rows = [
        {
            "seam": s.seam,
            "kind": s.kind,
            "guarded": True,
            "guardedBy": s.guarded_by,
            "branchReFires": s.branch_re_fires,
            "note": s.note,
        }
        for s in SEAMS
    ]
    return {"manifestVersion": "1", "host": {"name": "tether", "build": build()}, "seams": rows}


def ledger_entry(tenant: str, record: EffectRecord) -> dict[str, Any]:
    """One attempt as ``effect-ledger-projection.schema.json`` shows it: ids bound, no content."""
    entry: dict[str, Any] = {
        "effectId": bind(tenant, record.effect_id),
        "nodeId": record.node_id,
        "attempt": record.attempt,
        "keying": record.keying,
        "state": record.state,
        "at": record.at,
        "providerKey": record.provider_key,
    }
    if record.invocation_id is not None:
        entry["invocationId"] = record.invocation_id
    return entry


@router.get(MANIFEST_PATH, responses=refusals(*AUTHENTICATED))
async def get_effect_seams(principal: Principal = Depends(require("runs:read"))) -> Response:
    """The effect-seam manifest: where this host's runs touch the outside world, and what guards each path."""
    return json_response(manifest())


@router.get("/runs/{run_id}/effects", responses=refusals(*AUTHENTICATED, 400, 404))
async def get_run_effects(
    request: Request, run_id: RunPath, principal: Principal = Depends(require("runs:read"))
) -> Response:
    """The run's effect ledger, oldest attempt first: each attempt's effect, node, keying, state and time."""
    row = await load_run(request, run_id, principal)
    records = await EffectLedger(rest_of(request).store).recorded(row.run_id)
    effects = [ledger_entry(row.tenant, r) for r in records]
    return json_response({"runId": bind(row.tenant, row.run_id), "effects": effects})
