"""Version selection: which major a request speaks, the header every answer names it in, and the refusals.

v1 under /v1, v2 on the unversioned paths of the same origin; ``OpenWOP-Version`` selects
by major (``2`` and ``2.0`` alike). Tether's own routes carry no major.
"""

from __future__ import annotations

import httpx
import pytest
from harness import Host
from schemas import openwop_validator
from v2_wire import create, project, refused


def test_discovery_without_the_header_is_the_preferred_major_and_lists_both(host: Host) -> None:
    with host.client() as anonymous:
        bare = anonymous.get("/.well-known/openwop", headers={"Accept": "application/json"})
        asked = anonymous.get("/.well-known/openwop", headers={"OpenWOP-Version": "2.0"})
        short = anonymous.get("/.well-known/openwop", headers={"OpenWOP-Version": "2"})
    assert bare.status_code == asked.status_code == short.status_code == 200
    doc = bare.json()
    assert doc["protocolVersions"] == ["1.0", "2.0"] and doc["preferredVersion"] == "1.0"
    assert doc["protocolVersion"] == "1.0" and bare.headers["openwop-version"] == "1.0"
    assert asked.headers["openwop-version"] == short.headers["openwop-version"] == "2.0"
    assert asked.content != bare.content, "the v2 representation is another document"


@pytest.mark.parametrize("path", ["/runs/default~2Fhhhhhhhhhhhhhhhhhhhhhh", "/runs", "/no-such-path"])
def test_an_unversioned_path_without_the_header_is_major_2(host: Host, key: str, path: str) -> None:
    with host.client(key) as client:
        answer = client.get(path, headers={"Accept": "application/json"})
    assert answer.headers["openwop-version"] == "2.0", (answer.status_code, answer.text)


@pytest.mark.parametrize("value", ["9", "9.0", "3.1", "two", "", "2.0.1"])
def test_an_unlisted_major_is_406_everywhere_naming_what_is_served(host: Host, key: str, value: str) -> None:
    with host.client(key) as client:
        for path, major in (("/.well-known/openwop", "1.0"), ("/runs", "2.0"), ("/v1/runs", "1.0")):
            answer = client.get(path, headers={"OpenWOP-Version": value})
            assert answer.status_code == 406 and answer.headers["openwop-version"] == major, (path, answer.text)
            body = answer.json()
            openwop_validator("v2/error-envelope").validate(body)
            assert body["error"] == "protocol_version_unsupported"
            assert sorted(body["details"]["protocolVersions"]) == ["1.0", "2.0"]


def test_a_path_asked_for_the_other_major_is_400_and_writes_nothing(http: httpx.Client, host: Host, key: str) -> None:
    before = http.get("/runs", params={"limit": 100}).json()["runs"]
    with host.client(key) as client:
        v1 = client.post("/v1/runs", json={"workflowId": "echo", "inputs": {}}, headers={"OpenWOP-Version": "2.0"})
        assert v1.status_code == 400 and v1.json()["error"] == "protocol_version_mismatch"
        assert v1.headers["openwop-version"] == "1.0"
        v2 = client.post("/runs", json={"workflowId": "echo", "inputs": {}}, headers={"OpenWOP-Version": "1.0"})
        refused(v2, 400, "protocol_version_mismatch")
        openapi = client.get("/v1/openapi.json", headers={"OpenWOP-Version": "2.0"})
        assert openapi.status_code == 400 and openapi.json()["error"] == "protocol_version_mismatch"
    assert http.get("/runs", params={"limit": 100}).json()["runs"] == before


def test_every_protocol_answer_names_its_major_and_tethers_own_routes_none(host: Host, key: str) -> None:
    with host.client(key) as client:
        assert client.get("/v1/runs").headers["openwop-version"] == "1.0"
        assert client.get("/v1/runs/nope").headers["openwop-version"] == "1.0"  # a 404
        assert client.get("/v1/openapi.json").headers["openwop-version"] == "1.0"
        for path in ("/healthz", "/readyz", "/metrics", "/.well-known/agent-card.json", "/console"):
            answer = client.get(path)
            assert "openwop-version" not in answer.headers, path
        rpc = client.post("/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}})
        assert "openwop-version" not in rpc.headers


def test_a_bound_id_reads_the_same_projected_or_percent_encoded(http: httpx.Client) -> None:
    run_id = create(http)["runId"]
    tenant, _, opaque = run_id.partition("/")
    assert tenant == "default" and opaque.startswith("run_") and "~" not in run_id
    for form in (project(run_id), run_id.replace("/", "%2F"), run_id.replace("/", "%2f"), opaque):
        answer = http.get(f"/runs/{form}")
        assert answer.status_code == 200 and answer.json()["runId"] == run_id, (form, answer.text)
    refused(http.get(f"/runs/{tenant}~2"), 400, "validation_error")  # a malformed escape
    refused(http.get(f"/runs/{project(project(run_id))}"), 404, "not_found")  # projected twice: another id


def test_a_run_created_under_v1_reads_under_v2_by_its_bound_id(http: httpx.Client, host: Host, key: str) -> None:
    with host.client(key) as client:
        created = client.post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "v1"}})
        assert created.headers["openwop-version"] == "1.0"
    v1_id = created.json()["runId"]
    for form in (v1_id, project(f"default/{v1_id}")):
        answer = http.get(f"/runs/{form}")
        assert answer.status_code == 200 and answer.json()["runId"] == f"default/{v1_id}"
        assert answer.headers["openwop-version"] == "2.0"
