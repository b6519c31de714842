"""The effect ledger and the effect-seam manifest at major 2, against real hosts and a real HTTPS receiver.

The manifest is checked against the official ``effect-seam-manifest`` schema; the ledger's
shape is checked as ``effect-ledger-projection.schema.json`` defines it (the pinned oracle
does not carry that file). A delivery's ledger row must name the key its receiver saw.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trustme
from backends import suite_host
from harness import Host, wait_until
from receiver import Receiver, egress_to
from schemas import openwop_validator
from v2_wire import create, project, refused, wait_status

from tether.engine.effects import SEAMS

#: the manifest kinds the suite accepts (v2-effect-seam-manifest.test.ts)
SUITE_KINDS = {"http", "queue", "storage", "provider-sdk", "webhook-fanout"}
LEDGER_KEYS = {"effectId", "nodeId", "attempt", "keying", "state", "at", "invocationId", "providerKey"}
BOUND = re.compile(r"^default/[A-Za-z0-9._~-]{16,128}$")


@pytest.fixture(scope="module")
def rx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    receiver = Receiver(trustme.CA(), tmp_path_factory.mktemp("receiver")).start()
    yield receiver
    receiver.stop()


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str, rx: Receiver) -> Host:
    return suite_host(request, *egress_to(rx))


def test_the_manifest_lists_every_seam_guarded_and_validates(http: httpx.Client) -> None:
    answer = http.get("/host/effect-seams")
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = answer.json()
    openwop_validator("v2/effect-seam-manifest").validate(doc)
    rows = doc["seams"]
    assert [r["seam"] for r in rows] == [s.seam for s in SEAMS]
    assert all(r["guarded"] is True and r["guardedBy"] and r["kind"] in SUITE_KINDS for r in rows), rows
    assert doc["host"]["build"]["kind"] == "artifact-sha256" and re.fullmatch(
        r"[0-9a-f]{64}", doc["host"]["build"]["id"]
    )
    assert http.get("/host/effect-seams", headers={"Authorization": ""}).status_code == 401


def test_a_delivery_is_one_effect_of_its_node_whose_key_is_the_one_its_receiver_saw(
    http: httpx.Client, host: Host, rx: Receiver, other_tenant_key: str
) -> None:
    path = f"/callback/{uuid.uuid4().hex}"
    run = create(http, "approval-gated", callbackUrl=rx.url(path))  # its callback announces the gate
    wait_status(http, run["runId"], "waiting-approval")
    wait_until(lambda: [r for r in list(rx.requests) if r.path == path], what="the run's callback")
    [received] = [r for r in list(rx.requests) if r.path == path]

    def ledger() -> dict[str, Any] | None:
        answer = http.get(f"/runs/{project(run['runId'])}/effects")
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body if body["effects"] and body["effects"][0]["state"] == "completed" else None

    body = wait_until(ledger, what="the delivery's outcome in the ledger")
    assert set(body) == {"runId", "effects"} and body["runId"] == run["runId"]
    [effect] = body["effects"]
    assert set(effect) <= LEDGER_KEYS and {"effectId", "nodeId", "attempt", "keying", "state", "at"} <= set(effect)
    assert BOUND.fullmatch(effect["effectId"]), effect
    assert (effect["nodeId"], effect["attempt"], effect["keying"]) == ("gate", 1, "business-identity")
    key = received.headers["idempotency-key"]
    assert effect["providerKey"] == key == received.headers["webhook-id"]
    assert effect["effectId"] == f"default/{key}"
    # another tenant's key: refused like getRun, bound id before any lookup, a bare one never found
    foreign = host.http(other_tenant_key)
    foreign.headers.update({"OpenWOP-Version": "2.0"})
    refused(foreign.get(f"/runs/{project(run['runId'])}/effects"), 403, "id_tenant_mismatch")
    refused(foreign.get(f"/runs/{run['runId'].partition('/')[2]}/effects"), 404, "not_found")


def test_a_run_that_touched_nothing_has_an_empty_ledger_and_an_unknown_run_none(http: httpx.Client) -> None:
    run = create(http)
    wait_status(http, run["runId"], "completed")
    answer = http.get(f"/runs/{project(run['runId'])}/effects")
    assert answer.json() == {"runId": run["runId"], "effects": []}
    refused(http.get(f"/runs/{project('default/run_0000000000000000000000000000dead')}/effects"), 404, "not_found")
