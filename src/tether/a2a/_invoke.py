"""The A2A invoke seam (``--enable-test-seams`` only): the conformance suite drives this host's own A2A client.

``POST /conformance/seams/sample/a2a/invoke {peerUrl, authenticated?, peerOffersOnly?}``
(OpenWOP's seams profile, ``host-sample-test-seams.md`` §22) hands a one-line prompt to
the agent at ``peerUrl`` through a real hand-off: a run of a one-node workflow made for
that peer, followed by the production follower and client, under this host's floor
(``--a2a-minimum-version``). It answers once the hand-off's version is decided and the
peer took the task (or refused it):

- ``200 {negotiatedVersion, runId}``: the version spoken, and the (bound) run whose log
  carries the ``negotiation.decided`` event;
- ``400 interop_version_unsupported`` (``details: {protocol: "a2a", runId, sentToPeer}``): the
  peer offers only versions below the floor or none this host speaks, so it was sent
  nothing, or it refused the version it was sent (JSON-RPC ``-32009``); the event on the
  run says ``refused`` in the first two cases;
- ``502 a2a_peer_error``: the hand-off failed otherwise (``details.code`` says how).

With ``requestVersion`` (``<major>.<minor>``) no run is made: the client sends the peer one
message asking for that version on the interface it negotiated (``PeerClient.probe``),
and a peer's ``-32009`` (its ``error.data`` an ``ErrorInfo`` array or a legacy object: only
the code is read) answers ``400 interop_version_unsupported``; ``200 {negotiatedVersion}``
if the peer took it.

The caller's key is required (``runs:create``): the run is theirs. ``authenticated`` and
``peerOffersOnly`` describe the exchange the suite set up; neither changes what this host
does (its floor is its preferred version unless the operator lowered it, so no exchange,
authenticated or not, can lower the version below it). Nothing else of the seam is
remembered: each call is a run of its own.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from tether.a2a.surface import A2ASurface, a2a_of
from tether.engine.handoff.peer import PeerRefused, PeerUnavailable
from tether.errors import InvalidInput, TetherError
from tether.http.requests import json_body, json_object, require
from tether.http.responses import json_response
from tether.store.base import RunRow
from tether.types import TERMINAL, Principal

__all__ = ["INVOKE", "router"]

INVOKE: Final = "/conformance/seams/sample/a2a/invoke"
_NODE: Final = "peer"
_PROMPT: Final = "conformance: a2a invoke seam"
_UNSUPPORTED: Final = "interop_version_unsupported"
_VERSION: Final = re.compile(r"[0-9]+\.[0-9]+")

router = APIRouter(tags=["test seams"], include_in_schema=False)


class PeerFailed(TetherError):
    """The hand-off the seam drove failed for another reason than the version."""

    code = "a2a_peer_error"
    status = 502


def _workflow(workflow_id: str, peer_url: str) -> dict[str, Any]:
    """One hand-off node to ``peer_url`` (version ``auto``: the floor decides), its prompt fixed."""
    handoff = {
        "id": _NODE,
        "typeId": "vendor.tether.a2a-handoff",
        "name": "hand off to the suite's peer",
        "position": {"x": 0, "y": 0},
        "config": {"agent": peer_url},
        "inputs": {"prompt": {"type": "static", "value": _PROMPT}},
    }
    return {
        "id": workflow_id,
        "name": workflow_id,
        "version": "1.0.0",
        "nodes": [handoff],
        "edges": [],
        "triggers": [{"id": "manual", "type": "manual"}],
        "variables": [],
        "metadata": {},
        "settings": {},
    }


def _peer_url(body: dict[str, Any]) -> str:
    url = body.get("peerUrl")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise InvalidInput("peerUrl must be the peer agent's http(s) URL", details={"field": "peerUrl"})
    if "authenticated" in body and not isinstance(body["authenticated"], bool):
        raise InvalidInput("authenticated must be a boolean", details={"field": "authenticated"})
    asked = body.get("requestVersion")
    if asked is not None and (not isinstance(asked, str) or not _VERSION.fullmatch(asked)):
        raise InvalidInput("requestVersion must be <major>.<minor>", details={"field": "requestVersion"})
    return url


async def _probe(a2a: A2ASurface, peer_url: str, asked: str) -> Response:
    """``requestVersion``: one message asking the peer for that version, its refusal as this host reads it."""
    if a2a.peers is None:
        raise PeerFailed("this host has no A2A client", details={"code": "a2a_peer_not_configured"})
    try:
        version = await a2a.peers.probe(peer_url, asked)
    except PeerRefused as refused:
        if refused.code == _UNSUPPORTED:
            raise InvalidInput(refused.message, code=_UNSUPPORTED, details={"protocol": "a2a"}) from refused
        raise PeerFailed(refused.message, details={"code": refused.code}) from refused
    except PeerUnavailable as unavailable:
        raise PeerFailed(unavailable.message, details={"code": unavailable.code}) from unavailable
    return json_response({"negotiatedVersion": version})


def _settled(row: RunRow) -> bool:
    """The hand-off refused, failed, or the peer took the task (the version is then decided)."""
    node: dict[str, Any] = dict(row.state["nodeStates"].get(_NODE) or {})
    handoff = node.get("handoff") or {}
    return row.status in TERMINAL or node.get("status") == "failed" or "taskId" in handoff


@router.post(INVOKE)
async def invoke(request: Request, principal: Principal = Depends(require("runs:create"))) -> Response:
    """Hand a prompt to ``peerUrl`` through a real hand-off; the version decided and the run that says so."""
    a2a = a2a_of(request)
    body = json_object(await json_body(request))
    peer_url = _peer_url(body)
    if body.get("requestVersion") is not None:
        return await _probe(a2a, peer_url, body["requestVersion"])
    workflow_id = "conformance-a2a-invoke-" + hashlib.sha256(peer_url.encode()).hexdigest()[:16]
    if workflow_id not in a2a.registry:
        a2a.registry.add_raw(_workflow(workflow_id, peer_url), "test seam")
    created = await a2a.engine.create_run(principal, workflow_id, {}, tags=["seam:a2a-invoke"])
    run_id = created.run.run_id
    row = await a2a.engine.wait_for(run_id, _settled, a2a.settings.a2a_request_timeout) or created.run
    bound = f"{row.tenant}/{run_id}"  # as tether.openwop.v2.ids.bind spells it
    node: dict[str, Any] = dict(row.state["nodeStates"].get(_NODE) or {})
    handoff = node.get("handoff") or {}
    error = node.get("error") or {}
    if error.get("code") == _UNSUPPORTED:
        details = {"protocol": "a2a", "runId": bound, "sentToPeer": handoff.get("negotiated") != "refused"}
        raise InvalidInput(str(error.get("message", "")), code=_UNSUPPORTED, details=details)
    if "taskId" not in handoff:
        raise PeerFailed(
            str(error.get("message") or "the hand-off did not reach the peer in time"),
            details={"runId": bound, "code": error.get("code", "timeout")},
        )
    return json_response(
        {"negotiatedVersion": handoff.get("negotiatedVersion", handoff.get("version")), "runId": bound}
    )
