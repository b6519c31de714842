"""API keys, scopes and tenants against a real host: 401, 403, and 404 that hides other tenants."""

from __future__ import annotations

import json
import secrets
from typing import Any

import httpx
import pytest
from harness import Host, wait_until
from inproc import create_key, run_cli
from schemas import openwop_validator

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _envelope(response: httpx.Response, status: int, error: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, f"{response.status_code}: {response.text}"
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    openwop_validator("error-envelope").validate(body)
    if error is not None:
        assert body["error"] == error, body
    return body


def _unauthorized(response: httpx.Response) -> dict[str, Any]:
    body = _envelope(response, 401)
    assert response.headers["www-authenticate"].lower().startswith("bearer"), response.headers
    assert body["error"] in ("unauthenticated", "key_revoked", "key_expired")
    return body


def _create(http: httpx.Client, workflow: str = "approval-gated", inputs: dict[str, Any] | None = None) -> str:
    response = http.post(
        "/v1/runs", json={"workflowId": workflow, "inputs": {"prompt": "x"} if inputs is None else inputs}
    )
    assert response.status_code == 201, response.text
    run_id: str = response.json()["runId"]
    return run_id


def _wait_status(http: httpx.Client, run_id: str, status: str) -> None:
    wait_until(lambda: http.get(f"/v1/runs/{run_id}").json()["status"] == status, what=f"{run_id} to be {status}")


def _fake_key() -> str:
    return f"tk_{secrets.token_hex(8)}_{secrets.token_hex(32)}"


# --- 401 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Token tk_0123456789abcdef_" + "0" * 64,
        "Basic dXNlcjpwYXNz",
        "Bearer not-a-key",
        "Bearer tk_short_abc",
        "tk_0123456789abcdef_" + "0" * 64,  # no scheme
    ],
    ids=["none", "empty", "scheme-only", "wrong-scheme", "basic", "garbage", "short", "no-scheme"],
)
def test_missing_or_malformed_credentials_are_401(host: Host, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    with host.client() as http:
        for method, path in (
            ("GET", "/v1/runs"),
            ("POST", "/v1/runs"),
            ("GET", "/v1/runs/run_x/events"),
            ("GET", "/v1/workflows/echo"),
        ):
            _unauthorized(
                http.request(
                    method,
                    path,
                    headers=headers,
                    json={"workflowId": "echo", "inputs": {"prompt": "x"}} if method == "POST" else None,
                )
            )


def test_unknown_key_is_401(host: Host, key: str) -> None:
    _unauthorized(host.http(_fake_key()).get("/v1/runs"))
    # A real key id with the wrong secret is unknown too.
    key_id = key.split("_")[1]
    forged = f"tk_{key_id}_{secrets.token_hex(32)}"
    _unauthorized(host.http(forged).get("/v1/runs"))
    _unauthorized(host.http(forged).post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}))
    assert host.http().get("/v1/runs", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_revoked_key_is_401(host: Host) -> None:
    old = create_key(host.data_dir, "old")
    run_cli("keys", "revoke", "old", data_dir=host.data_dir)
    body = _unauthorized(host.http(old).get("/v1/runs"))
    assert "revoked" in body["message"] or body["error"] == "key_revoked"


def test_key_revoked_while_host_runs_stops_working(host: Host, key: str) -> None:
    temp = create_key(host.data_dir, "temp")
    assert host.http(temp).get("/v1/runs").status_code == 200  # now cached by the host
    result = run_cli("keys", "revoke", "temp", data_dir=host.data_dir)
    assert "revoked" in result.stdout
    wait_until(
        lambda: host.http(temp).get("/v1/runs").status_code == 401, timeout=10, what="the revoked key to be refused"
    )
    _unauthorized(host.http(temp).get("/v1/runs"))
    _unauthorized(host.http(temp).post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}))
    assert host.http(key).get("/v1/runs").status_code == 200, "revoking one key leaves the others alone"


def test_key_created_while_host_runs_works(host: Host) -> None:
    fresh = create_key(host.data_dir, "fresh", "--scopes", "runs:create,runs:read")
    run_id = _create(host.http(fresh), "echo")
    _wait_status(host.http(fresh), run_id, "completed")
    snapshot = host.http(fresh).get(f"/v1/runs/{run_id}").json()
    assert snapshot["owner"]["tenant"] == "default"


# --- 403 ------------------------------------------------------------------------------------------


@pytest.mark.fresh_host  # lists every run of the tenant
def test_read_only_key_cannot_create(host: Host, key: str) -> None:
    reader = create_key(host.data_dir, "reader", "--scopes", "runs:read")
    body = _envelope(
        host.http(reader).post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}), 403, "forbidden"
    )
    assert body.get("details", {}).get("scopeRequired") == "runs:create"
    assert host.http(key).get("/v1/runs").json()["runs"] == [], "a refused create made no run"
    run_id = _create(host.http(key), "echo")
    listed = host.http(reader).get("/v1/runs")
    assert listed.status_code == 200
    assert [r["runId"] for r in listed.json()["runs"]] == [run_id]
    assert host.http(reader).get(f"/v1/runs/{run_id}").status_code == 200
    assert host.http(reader).get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).status_code == 200
    _envelope(host.http(reader).post(f"/v1/runs/{run_id}/cancel", json={}), 403, "forbidden")
    _envelope(host.http(reader).get("/v1/workflows/echo"), 403, "forbidden")


def test_cancel_only_key_cannot_read(host: Host, key: str) -> None:
    canceller = create_key(host.data_dir, "canceller", "--scopes", "runs:cancel")
    run_id = _create(host.http(key))
    _wait_status(host.http(key), run_id, "waiting-approval")
    for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events/poll", "/v1/runs"):
        body = _envelope(host.http(canceller).get(path), 403, "forbidden")
        assert body["details"]["scopeRequired"] == "runs:read"
    _envelope(
        host.http(canceller).post(f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "accept"}}),
        403,
        "forbidden",
    )
    assert host.http(key).get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval"
    cancelled = host.http(canceller).post(f"/v1/runs/{run_id}/cancel", json={})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


def test_forbidden_comes_before_not_found(host: Host) -> None:
    reader = create_key(host.data_dir, "reader2", "--scopes", "runs:read")
    _envelope(host.http(reader).post("/v1/runs/run_nope/cancel", json={}), 403, "forbidden")
    _envelope(host.http(reader).post("/v1/runs/run_nope/interrupts/gate", json={"resumeValue": {}}), 403, "forbidden")


# --- tenants -------------------------------------------------------------------------------------


def _normalized(body: dict[str, Any], run_id: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(json.dumps(body).replace(run_id, "<RUN>"))
    return value


@pytest.mark.fresh_host  # lists every run of both tenants
def test_other_tenant_sees_nothing(host: Host, key: str, other_tenant_key: str) -> None:
    mine = host.http(key)
    theirs = host.http(other_tenant_key)
    run_id = _create(mine)
    _wait_status(mine, run_id, "waiting-approval")
    before = mine.get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()["events"]
    # A made-up id shaped like a real one: the two 404s must not be told apart.
    made_up = "run_" + "".join(reversed(run_id[4:]))
    assert len(made_up) == len(run_id) and made_up != run_id

    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/v1/runs/{id}", {}),
        ("GET", "/v1/runs/{id}/events", {"headers": {"Accept": "text/event-stream"}}),
        ("GET", "/v1/runs/{id}/events/poll", {"params": {"timeout": 0}}),
        ("POST", "/v1/runs/{id}/cancel", {"json": {}}),
        ("POST", "/v1/runs/{id}:cancel", {"json": {}}),
        ("POST", "/v1/runs/{id}/interrupts/gate", {"json": {"resumeValue": {"action": "accept"}}}),
    ]
    for method, template, kwargs in requests:
        real = theirs.request(method, template.format(id=run_id), **kwargs)
        fake = theirs.request(method, template.format(id=made_up), **kwargs)
        real_body = _envelope(real, 404)
        fake_body = _envelope(fake, 404)
        assert _normalized(real_body, run_id) == _normalized(fake_body, made_up), (template, real_body, fake_body)
        assert real.headers["content-type"] == fake.headers["content-type"]

    assert theirs.get("/v1/runs").json()["runs"] == []
    assert theirs.get("/v1/runs", params={"workflowId": "approval-gated"}).json()["runs"] == []
    assert theirs.get("/v1/runs", params={"status": "waiting-approval"}).json()["runs"] == []
    # Nothing the other tenant tried touched the run.
    snapshot = mine.get(f"/v1/runs/{run_id}").json()
    assert snapshot["status"] == "waiting-approval"
    assert mine.get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()["events"] == before
    assert [r["runId"] for r in mine.get("/v1/runs").json()["runs"]] == [run_id]


@pytest.mark.fresh_host  # lists every run of both tenants
def test_tenants_keep_their_own_runs_and_idempotency_keys(host: Host, key: str, other_tenant_key: str) -> None:
    request = {"workflowId": "echo", "inputs": {"prompt": "same"}}
    mine = host.http(key).post("/v1/runs", json=request, headers={"Idempotency-Key": "shared-key"})
    theirs = host.http(other_tenant_key).post("/v1/runs", json=request, headers={"Idempotency-Key": "shared-key"})
    assert mine.status_code == 201 and theirs.status_code == 201
    assert mine.json()["runId"] != theirs.json()["runId"], "an idempotency key is scoped to its tenant"
    assert "openwop-Idempotent-Replay" not in theirs.headers
    assert [r["runId"] for r in host.http(key).get("/v1/runs").json()["runs"]] == [mine.json()["runId"]]
    assert [r["runId"] for r in host.http(other_tenant_key).get("/v1/runs").json()["runs"]] == [theirs.json()["runId"]]
    assert host.http(other_tenant_key).get(f"/v1/runs/{theirs.json()['runId']}").json()["owner"]["tenant"] == "acme"


def test_create_naming_another_tenant_is_refused(host: Host, other_tenant_key: str) -> None:
    _envelope(
        host.http(other_tenant_key).post(
            "/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}, "tenantId": "default"}
        ),
        403,
        "forbidden",
    )
    assert host.http(other_tenant_key).get("/v1/runs").json()["runs"] == []


# --- public endpoints, tracing, principal ----------------------------------------------------------


def test_discovery_and_openapi_need_no_key(host: Host) -> None:
    with host.client() as http:
        discovery = http.get("/.well-known/openwop")
        assert discovery.status_code == 200
        openwop_validator("capabilities").validate(discovery.json())
        openapi = http.get("/v1/openapi.json")
        assert openapi.status_code == 200
        assert "/v1/runs" in openapi.json()["paths"]
        # a bad key on a public endpoint does not turn it into a 401
        assert http.get("/.well-known/openwop", headers={"Authorization": "Bearer nonsense"}).status_code == 200


def test_traceparent_is_echoed(host: Host, key: str) -> None:
    headers = {"traceparent": TRACEPARENT}
    assert host.http(key).get("/v1/runs", headers=headers).headers.get("traceparent") == TRACEPARENT
    assert host.http().get("/.well-known/openwop", headers=headers).headers.get("traceparent") == TRACEPARENT
    refused = host.http().get("/v1/runs", headers=headers)
    assert refused.status_code == 401 and refused.headers.get("traceparent") == TRACEPARENT
    missing = host.http(key).get("/v1/runs/run_nope", headers=headers)
    assert missing.status_code == 404 and missing.headers.get("traceparent") == TRACEPARENT
    assert "traceparent" not in host.http(key).get("/v1/runs").headers


def test_decided_by_is_the_keys_principal(host: Host) -> None:
    approver = create_key(host.data_dir, "approver")
    http = host.http(approver)
    run_id = _create(http)
    _wait_status(http, run_id, "waiting-approval")
    response = http.post(
        f"/v1/runs/{run_id}/interrupts/gate",
        json={"resumeValue": {"action": "accept", "decidedBy": "mallory", "feedback": "ok"}},
    )
    assert response.status_code == 200, response.text
    _wait_status(http, run_id, "completed")
    events = http.get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()["events"]
    received = [e for e in events if e["type"] == "approval.received"]
    assert len(received) == 1
    assert received[0]["payload"]["decidedBy"] == "key:approver"
    assert received[0]["payload"]["feedback"] == "ok"
    resolved = [e for e in events if e["type"] == "interrupt.resolved"]
    assert resolved[0]["payload"]["resumeValue"]["decidedBy"] == "key:approver"
    assert "mallory" not in str(events)
    started = events[0]
    assert started["payload"]["owner"] == {"tenant": "default", "principal": "key:approver"}
