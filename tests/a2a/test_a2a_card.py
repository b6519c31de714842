"""The agent card and the discovery ``a2a`` block: public, valid, and honest about routing."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a_wire import error, message, rpc, send
from harness import Host
from proto_oracle import validate_v10
from schemas import a2a_validator, fixtures_dir, openwop_validator

BUNDLED = ["approval-gated", "clarification-gated", "echo", "multi-step", "shape"]
TEST_WORKFLOWS = ["always-fails", "route-by-message", "slow", "slow-gate"]


def test_card_is_public_valid_and_names_the_rpc_endpoint(host: Host) -> None:
    with host.client() as anonymous:
        card = anonymous.get("/.well-known/agent-card.json")
        beside = anonymous.get("/v1/a2a/agent.json")
    assert card.status_code == 200 and beside.status_code == 200
    doc = card.json()
    assert beside.json() == doc
    a2a_validator("AgentCard").validate(doc)
    assert doc["protocolVersion"] == "0.3.0"
    assert doc["url"] == f"{host.url}/v1/a2a"
    assert doc["preferredTransport"] == "JSONRPC"
    assert {"url": doc["url"], "transport": "JSONRPC"} in doc["additionalInterfaces"]
    assert doc["securitySchemes"]["bearer"]["type"] == "http" and doc["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert doc["security"] == [{"bearer": []}]
    assert sorted(s["id"] for s in doc["skills"]) == sorted(BUNDLED + TEST_WORKFLOWS)


def test_a_1_x_caller_gets_the_strict_1_0_card_and_others_the_merged_one(host: Host) -> None:
    with host.client() as anonymous:
        merged = anonymous.get("/.well-known/agent-card.json")
        strict = anonymous.get("/.well-known/agent-card.json", headers={"A2A-Version": "1.0"})
    assert merged.headers["vary"] == strict.headers["vary"] == "A2A-Version"
    assert merged.headers["etag"] != strict.headers["etag"]
    validate_v10("AgentCard", strict.json())
    validate_v10("AgentCard+0.3", merged.json())
    a2a_validator("AgentCard").validate(merged.json())
    doc = strict.json()
    assert doc["supportedInterfaces"][0] == {
        "url": f"{host.url}/v1/a2a",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert {(i["protocolBinding"], i["protocolVersion"]) for i in doc["supportedInterfaces"]} == {
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
    }
    assert doc["securitySchemes"]["bearer"] == {
        "httpAuthSecurityScheme": merged.json()["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]
    }
    assert {k: v for k, v in merged.json().items() if k in doc} == {
        **doc,
        "securitySchemes": merged.json()["securitySchemes"],
    }


def test_card_and_discovery_advertise_the_same_flags(host: Host) -> None:
    with host.client() as anonymous:
        card = anonymous.get("/.well-known/agent-card.json").json()
        discovery = anonymous.get("/.well-known/openwop").json()
    openwop_validator("capabilities").validate(discovery)
    a2a = discovery["a2a"]
    assert a2a == {
        "supported": True,
        "agentCardUrl": f"{host.url}/.well-known/agent-card.json",
        "streaming": True,
        "pushNotifications": True,
        "durableTasks": True,
        "protocolVersions": ["1.0", "0.3"],
        "preferredVersion": "1.0",
        "profiles": ["a2a-1.0", "a2a-0.3-legacy"],
    }
    assert "a2a" in discovery["supportedTransports"]
    assert card["capabilities"]["streaming"] is a2a["streaming"]
    assert card["capabilities"]["pushNotifications"] is a2a["pushNotifications"]


def test_the_extended_card_is_served_to_key_holders_as_the_card_says(host: Host, http: httpx.Client) -> None:
    public = http.get("/.well-known/agent-card.json").json()
    assert public["supportsAuthenticatedExtendedCard"] is True and public["capabilities"]["extendedAgentCard"] is True
    extended = rpc(http, "agent/getAuthenticatedExtendedCard", {})["result"]
    a2a_validator("AgentCard").validate(extended)
    assert extended == public
    with host.client() as anonymous:
        refused = anonymous.post(
            "/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}
        )
    assert refused.status_code == 401


def test_card_security_is_what_the_endpoint_enforces(host: Host) -> None:
    with host.client() as anonymous:
        refused = anonymous.post(
            "/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}
        )
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].lower().startswith("bearer")


def test_only_card_skills_are_routable(start_host) -> None:  # type: ignore[no-untyped-def]
    host: Host = start_host("--seed-fixtures", str(fixtures_dir()))
    assert host.dev_key
    http = host.http(host.dev_key)
    card = http.get("/.well-known/agent-card.json").json()
    skills = {s["id"] for s in card["skills"]}
    assert skills == set(BUNDLED), "seeded fixtures are not skills"
    fixtures = http.get("/.well-known/openwop").json()["fixtures"]
    assert fixtures and not skills & set(fixtures)
    refused = error(http, "message/send", {"message": message("x", skill=fixtures[0])})
    assert refused["code"] == -32602 and "not a skill" in refused["message"]
    for skill in sorted(skills - {"approval-gated", "clarification-gated"}):
        task = send(http, message("hi", skill=skill))
        assert task["status"]["state"] == "completed", (skill, task)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_a2a_sdk_resolves_the_card(host: Host) -> None:
    async with httpx.AsyncClient() as client:
        card = await A2ACardResolver(client, host.url).get_agent_card()
    assert card.url == f"{host.url}/v1/a2a"
    assert card.capabilities.streaming is True
    assert {s.id for s in card.skills} >= set(BUNDLED)
