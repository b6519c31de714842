"""Runs at major 2: the closed create body and its limits, the v2 idempotency grammar, the snapshot, the list.

Every snapshot is held to the official v2 ``run-snapshot`` schema; every refusal to the v2
error envelope, and a refused create writes no run.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

import httpx
import pytest
from harness import Host
from schemas import openwop_validator
from v2_wire import create, project, refused, wait_status


def _runs(http: httpx.Client) -> list[str]:
    return [r["runId"] for r in http.get("/runs", params={"limit": 100}).json()["runs"]]


def _key() -> str:
    return secrets.token_urlsafe(16)  # 22 characters of the v2 grammar, 128 bits


def test_create_answers_bound_ids_and_same_origin_urls_and_the_snapshot_is_v2(http: httpx.Client, host: Host) -> None:
    created = http.post("/runs", json={"workflowId": "echo", "inputs": {"prompt": "hi"}})
    assert created.status_code == 201 and created.headers["openwop-version"] == "2.0"
    body = created.json()
    run_id = body["runId"]
    assert run_id.startswith("default/run_") and "~" not in run_id
    assert body["eventsUrl"] == f"{host.url}/runs/{project(run_id)}/events"
    assert body["statusUrl"] == f"{host.url}/runs/{project(run_id)}" and "%2F" not in body["eventsUrl"]
    snapshot = wait_status(http, run_id, "completed")
    openwop_validator("v2/run-snapshot").validate(snapshot)
    assert snapshot["runId"] == run_id and snapshot["eventLogSchemaVersion"] == 3
    assert isinstance(snapshot["engineVersion"], int)
    subject = snapshot["owner"]["subject"]
    assert snapshot["owner"] == {"tenant": "default", "subject": subject}
    assert subject["lane"] == "api-key" and subject["kind"] == "user" and subject["tenant"] == "default"
    assert subject["subjectId"] == host.dev_key.split("_")[1], "a key is named by its public id, never its name"
    assert snapshot["inputs"] == {"prompt": "hi"}


def test_a_pending_interrupt_shows_in_tethers_extension_with_an_ow2_token(http: httpx.Client) -> None:
    run_id = create(http, "approval-gated")["runId"]
    snapshot = wait_status(http, run_id, "waiting-approval")
    openwop_validator("v2/run-snapshot").validate(snapshot)
    pending = snapshot["extensions"]["tether.interrupt"]
    assert pending["kind"] == "approval" and pending["interruptId"].startswith("default/int_")
    assert pending["interruptToken"].startswith("ow2.hs256.")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tags": [f"t{i}" for i in range(101)]}, "tags"),
        ({"tags": ["y" * 257]}, "tags"),
        ({"conformanceUnknownRootKey": 1}, "conformanceUnknownRootKey"),
        ({"inputs": []}, "inputs"),
        ({"metadata": "x"}, "metadata"),
        ({"configurable": {"version": 1, "run": {"recursionLimit": 3}}}, "configurable"),
        ({"configurable": {"run": {}}}, "configurable"),
        ({"mode": "eval"}, "mode"),
        ({"residency": {"region": "eu"}}, "residency"),
        ({"workflowId": "no such workflow!"}, "workflowId"),
        ({"tenantId": "default", "scopeId": 5}, "scopeId"),
    ],
)
def test_a_create_body_outside_the_closed_shape_is_400_naming_the_field(
    http: httpx.Client, body: dict[str, Any], field: str
) -> None:
    before = _runs(http)
    answer = http.post("/runs", json={"workflowId": "echo", "inputs": {}, **body})
    error = refused(answer, 400, "validation_error")
    assert field in error["message"] or field in str(error.get("details")), error
    assert _runs(http) == before


def test_odd_tags_and_metadata_round_trip(http: httpx.Client) -> None:
    tags = ["has space", "emoji 🚀", "slash/colon:pipe|", "UPPER-and_under", "x" * 256]
    metadata = {"nested": {"a": 1, "b": [1, "2", None, True]}, "s": "unicode ∞ ok", "n": 0}
    run_id = create(http, tags=tags, metadata=metadata)["runId"]
    snapshot = http.get(f"/runs/{project(run_id)}").json()
    assert snapshot["tags"] == tags and snapshot["metadata"] == metadata


@pytest.mark.parametrize(
    "idempotency_key", ["short", "a" * 21, "a" * 129, "has space in it 0123456789", "colons:are:v1:only:0123456"]
)
def test_an_idempotency_key_outside_the_v2_grammar_is_refused(http: httpx.Client, idempotency_key: str) -> None:
    before = _runs(http)
    headers = {"Idempotency-Key": idempotency_key}
    answer = http.post("/runs", json={"workflowId": "echo", "inputs": {}}, headers=headers)
    refused(answer, 400, "idempotency_key_invalid")
    assert _runs(http) == before


def test_an_idempotent_create_replays_and_a_different_body_is_a_mismatch(http: httpx.Client, host: Host) -> None:
    key = _key()
    body = {"workflowId": "echo", "inputs": {"prompt": "once"}}
    first = http.post("/runs", json=body, headers={"Idempotency-Key": key})
    again = http.post("/runs", json=body, headers={"Idempotency-Key": key})
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    assert "openwop-idempotent-replay" not in first.headers and again.headers["openwop-idempotent-replay"] == "true"
    other = http.post("/runs", json={**body, "inputs": {"prompt": "twice"}}, headers={"Idempotency-Key": key})
    refused(other, 409, "idempotency_key_mismatch")
    # the same key at major 1 is another endpoint's: v1's grammar, v1's record
    with host.client(host.dev_key) as client:
        v1 = client.post("/v1/runs", json=body, headers={"Idempotency-Key": key})
    assert v1.status_code == 201 and v1.json()["runId"] != first.json()["runId"].partition("/")[2]


def test_concurrent_creates_with_one_key_make_one_run(http: httpx.Client, host: Host) -> None:
    key = _key()
    body = {"workflowId": "echo", "inputs": {"prompt": "raced"}}
    answers: list[httpx.Response] = []

    def post() -> None:
        with host.client(host.dev_key) as client:
            answers.append(client.post("/runs", json=body, headers={"Idempotency-Key": key, "OpenWOP-Version": "2.0"}))

    threads = [threading.Thread(target=post) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    created = [a for a in answers if a.status_code == 201]
    assert len(answers) == 5 and created, [a.text for a in answers]
    assert len({a.json()["runId"] for a in created}) == 1
    assert sum("openwop-idempotent-replay" not in a.headers for a in created) == 1
    for other in answers:
        if other.status_code != 201:
            refused(other, 409, "idempotency_in_flight")


def test_the_list_is_the_tenants_newest_first_with_a_cursor_the_host_minted(
    http: httpx.Client, host: Host, other_tenant_key: str
) -> None:
    mine = [create(http)["runId"] for _ in range(3)]
    with host.client(other_tenant_key) as client:
        theirs = client.post(
            "/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}, headers={"OpenWOP-Version": "2.0"}
        )
    first = http.get("/runs", params={"limit": 2}).json()
    for run in first["runs"]:
        openwop_validator("v2/run-snapshot").validate(run)
    assert [r["runId"] for r in first["runs"]] == mine[::-1][:2]
    second = http.get("/runs", params={"limit": 2, "cursor": first["nextCursor"]}).json()
    assert second["runs"][0]["runId"] == mine[0]
    assert theirs.json()["runId"] not in _runs(http)
    refused(http.get("/runs", params={"cursor": "bm90LWEtY3Vyc29y"}), 400, "validation_error")
    refused(http.get("/runs", params={"limit": 101}), 400, "validation_error")


def test_another_tenants_run_is_refused_before_it_is_looked_up(
    http: httpx.Client, host: Host, other_tenant_key: str
) -> None:
    with host.client(other_tenant_key) as client:
        theirs = client.post(
            "/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}, headers={"OpenWOP-Version": "2.0"}
        )
    their_id = theirs.json()["runId"]
    assert their_id.startswith("acme/")
    foreign = refused(http.get(f"/runs/{project(their_id)}"), 403, "id_tenant_mismatch")
    unknown = refused(
        http.get(f"/runs/{project('acme/run_00000000000000000000000000000000')}"), 403, "id_tenant_mismatch"
    )
    assert foreign == unknown, "a foreign id answers exactly like an unknown one of that tenant"
    # its bare id, under this caller's tenant, is simply not there
    refused(http.get(f"/runs/{their_id.partition('/')[2]}"), 404, "not_found")
