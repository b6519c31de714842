"""Interrupts at major 2 (by run, by an ``ow2.`` token, a v1 token still honoured) and the closed discovery root."""

from __future__ import annotations

import copy
from urllib.parse import quote

import httpx
import pytest
from harness import Host
from jsonschema import ValidationError
from schemas import openwop_validator
from v2_wire import create, project, refused, wait_status

UNPREFIXED = "b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef"
UNHELD_KID = "ow2.hs256.nokid.b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef"


def _gated(http: httpx.Client) -> tuple[str, dict[str, object]]:
    run_id = create(http, "approval-gated")["runId"]
    pending = wait_status(http, run_id, "waiting-approval")["extensions"]["tether.interrupt"]
    assert isinstance(pending, dict)
    return run_id, pending


def test_a_token_this_host_did_not_sign_is_401_before_any_key_is_asked_for(host: Host) -> None:
    with host.client() as anonymous:
        for token in (UNPREFIXED, UNHELD_KID, "ow2.hs999.k.e30.AA", "ow2.only.three"):
            answer = anonymous.get(f"/interrupts/{quote(token, safe='')}", headers={"OpenWOP-Version": "2.0"})
            refused(answer, 401, "interrupt_token_invalid")


def test_an_ow2_token_inspects_and_resolves_once(http: httpx.Client, host: Host) -> None:
    run_id, pending = _gated(http)
    token = str(pending["interruptToken"])
    with host.client() as anonymous:  # the token is the credential
        anonymous.headers["OpenWOP-Version"] = "2.0"
        seen = anonymous.get(f"/interrupts/{quote(token, safe='')}")
        assert seen.status_code == 200, seen.text
        view = seen.json()
        openwop_validator("v2/suspend-request").validate({k: view[k] for k in ("kind", "key", "data")})
        assert view["interruptId"] == pending["interruptId"]
        resolved = anonymous.post(f"/interrupts/{quote(token, safe='')}", json={"resumeValue": {"action": "accept"}})
        assert resolved.status_code == 200 and resolved.json()["runId"] == run_id
        refused(
            anonymous.post(f"/interrupts/{quote(token, safe='')}", json={"resumeValue": {"action": "accept"}}),
            409,
            "interrupt_already_resolved",
        )
    assert wait_status(http, run_id, "completed")["status"] == "completed"


def test_a_v1_token_still_resolves_at_major_2(http: httpx.Client, host: Host) -> None:
    run_id, pending = _gated(http)
    with host.client(host.dev_key) as client:
        v1_token = client.get(f"/v1/runs/{run_id.partition('/')[2]}").json()["interrupt"]["interruptToken"]
    assert not v1_token.startswith("ow2.")
    with host.client() as anonymous:
        answer = anonymous.post(
            f"/interrupts/{quote(v1_token, safe='')}",
            json={"resumeValue": {"action": "reject", "reason": "no"}},
            headers={"OpenWOP-Version": "2.0"},
        )
    assert answer.status_code == 200, answer.text


def test_resolving_by_run_refuses_what_the_gate_does_not_offer_and_writes_nothing(http: httpx.Client) -> None:
    run_id, pending = _gated(http)
    node = pending["nodeId"]
    before = http.get(f"/runs/{project(run_id)}/events/poll", params={"timeout": 0}).json()["events"]
    path = f"/runs/{project(run_id)}/interrupts/{node}"
    refused(http.post(path, json={"resumeValue": {"action": "approve-it"}}), 400, "validation_error")
    refused(http.post(path, json={"resumeValue": {"action": "accept"}, "extra": 1}), 400, "validation_error")
    refused(
        http.post(f"/runs/{project(run_id)}/interrupts/elsewhere", json={"resumeValue": {}}), 404, "interrupt_not_found"
    )
    after = http.get(f"/runs/{project(run_id)}/events/poll", params={"timeout": 0}).json()["events"]
    assert after == before


def test_the_v2_root_is_closed_and_validates(host: Host) -> None:
    with host.client() as anonymous:
        answer = anonymous.get("/.well-known/openwop", headers={"OpenWOP-Version": "2.0"})
        assert answer.status_code == 200 and answer.headers["openwop-version"] == "2.0"
        assert answer.headers["vary"] == "OpenWOP-Version" and answer.headers["etag"].startswith('"')
        again = anonymous.get(
            "/.well-known/openwop", headers={"OpenWOP-Version": "2.0", "If-None-Match": answer.headers["etag"]}
        )
        assert again.status_code == 304 and again.headers["openwop-version"] == "2.0" and not again.content
        v1 = anonymous.get("/.well-known/openwop")
    assert v1.headers["etag"] != answer.headers["etag"]
    root = answer.json()
    validator = openwop_validator("v2/capabilities")
    validator.validate(root)
    assert root["eventLogSchemaVersion"] == 3 and isinstance(root["engineVersion"], int)
    assert root["interrupt"]["tokenAlgs"] == ["hs256"]
    for v1_only in ("supportedTransports", "retention"):
        assert v1_only not in root, v1_only
    for family in ("a2a", "webhooks"):  # records at major 2: presence is the claim, there is no `supported`
        assert "supported" not in root[family], family
    # RFC 0100's block at major 2: 1.0 alone (0.3 stays on /v1/a2a and the v1 document)
    assert root["a2a"]["versions"] == ["1.0"] and root["a2a"]["minimumVersion"] == "1.0"
    assert "0.3" in v1.json()["a2a"]["protocolVersions"]
    # the suite injects each forbidden shape and expects validation to fail: the schema must see them
    for injected in (
        {"openwopConformanceUnknownRootKey": {"status": "stable", "since": "2.0", "witness": "claims-check"}},
        {"host.replay": {"status": "stable", "since": "2.0", "witness": "claims-check"}},
        {"capabilities": {}},
        {"profiles": ["openwop-discovery-core"]},
    ):
        with pytest.raises(ValidationError):
            validator.validate({**copy.deepcopy(root), **injected})
