"""The seams-v2 floor checks against a fake host that serves the seams as their contracts say, and against one
fault at a time: each check passes the honest host and fails (or is blocked, inapplicable) exactly where it must.

Tether does not serve the v2 seams or replay yet, so these checks cannot be run against it; the fake host is
an ``httpx.MockTransport`` behind the checks' own HTTP client, and the effect provider the retry check starts
is a real socket the fake host's effect really reaches, twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from schemas import openwop_validator

from tether.certify import core_standard, seams
from tether.certify.ledger import run_check
from tether.certify.session import Session

LEGACY = {"owner": {"tenant": "t", "subject": {"issuer": "urn:openwop:legacy", "id": "legacy"}}}
RENAMED = {"agent.toolCalled": "agent.tool-called", "agent.toolReturned": "agent.tool-returned"}


class FakeHost:
    """Just enough of a v2 host with seams: a seeded era-2 log, forks, an effect ledger, a webhook verifier."""

    def __init__(self, *faults: str, seams_profile: bool = True, mounted: bool = True) -> None:
        self.faults = set(faults)
        self.seams_profile = seams_profile
        self.mounted = mounted
        self.logs: dict[str, list[dict[str, Any]]] = {}
        self.effects: dict[str, list[dict[str, Any]]] = {}

    def root(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"protocolVersions": ["1.0", "2.0"], "preferredVersion": "1.0"}
        for family in ("replay", "idempotency", "webhooks"):
            doc[family] = {"status": "experimental", "since": "2.0", "until": "2.1", "witness": "seam-gated"}
        doc["replay"].update(modes=["replay"], effectSeamsManifest="/host/effect-seams")
        if self.seams_profile:
            doc["conformance"] = {"seamsProfile": "openwop-conformance-seams-v2"}
        return doc

    def read(self, run_id: str) -> list[dict[str, Any]]:
        """The log as read at v2: v1 types translated, the legacy subject stamped on run.started."""
        out = []
        for event in self.logs[run_id]:
            event = {**event, "type": RENAMED.get(event["type"], event["type"])}
            if event["type"] == "run.started" and "owner" not in event["payload"]:
                event["payload"] = {**event["payload"], **LEGACY}
            out.append(event)
        return out

    def fire(self, run_id: str, node: str, at: str) -> None:
        self.effects.setdefault(run_id, []).append(
            {"effectId": f"t/{node}-eff-0000000001", "nodeId": node, "attempt": 1, "at": at}
        )

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = unquote(request.url.path)
        body: Any = json.loads(request.content) if request.content else None
        if path == "/.well-known/openwop":
            return httpx.Response(200, json=self.root())
        if path.startswith("/conformance/seams/") and not self.mounted:
            return httpx.Response(404, json={"error": "not_found"})
        if path == "/conformance/seams/sample/event-log/seed":
            self.logs["t/seeded-run-000000001"] = body["events"]
            return httpx.Response(201, json={"runId": "t/seeded-run-000000001"})
        if path.endswith("/events/poll"):
            run_id = path.removeprefix("/runs/").removesuffix("/events/poll")
            return httpx.Response(200, json={"runId": run_id, "events": self.read(run_id)})
        if path.endswith(":fork"):
            parent = path.removeprefix("/runs/").removesuffix(":fork")
            fork = f"{parent}-fork"
            if parent in self.logs:
                cut = body.get("fromSeq", len(self.logs[parent]))
                inherited = [dict(e) for e in self.read(parent) if e["sequence"] < cut]
                if "fork-drifts" in self.faults:  # a prefix re-executed, not inherited: one payload differs
                    inherited[1] = {**inherited[1], "payload": {**inherited[1]["payload"], "callId": "call-0002"}}
                self.logs[fork] = inherited
            if "refire" in self.faults:
                self.fire(fork, "fire", "2026-12-08T00:00:09.000Z")
            return httpx.Response(201, json={"runId": fork})
        if path == "/host/effect-seams":
            row = {"seam": "webhook.deliver", "kind": "webhook-fanout", "guarded": True, "guardedBy": "ledger"}
            if "branch-refire-unoffered" in self.faults:
                row["branchReFires"] = True
            host = {"name": "fake", "build": {"kind": "commit", "id": "0"}}
            return httpx.Response(200, json={"manifestVersion": "1", "host": host, "seams": [row]})
        if path == "/conformance/seams/sample/effect-seams/fire":
            self.fire("t/fired-run-0000000001", "fire", "2026-12-08T00:00:01.000Z")
            return httpx.Response(201, json={"runId": "t/fired-run-0000000001"})
        if path.endswith("/effects"):
            run_id = path.removeprefix("/runs/").removesuffix("/effects")
            return httpx.Response(200, json={"runId": run_id, "effects": self.effects.get(run_id, [])})
        if path == "/conformance/seams/sample/test/idempotency/effect-retry":
            return self.effect_retry(body["providerUrl"])
        if path == "/conformance/seams/sample/webhooks/receive":
            return httpx.Response(200, json={"accepted": self.verify(body)})
        return httpx.Response(404, json={"error": "not_found"})

    def effect_retry(self, provider: str) -> httpx.Response:
        """One effect sent for real to ``provider``, retried after a transport failure under one key."""
        run_id, effect_id = "t/retry-run-00000000001", "t/eff-retry-000000000001"
        for attempt in (1, 2):
            key = f"key-{attempt}" if "fresh-keys" in self.faults else "effect-key-0000000000000001"
            try:
                httpx.post(provider, json={}, headers={"Idempotency-Key": key}, timeout=5)
            except httpx.TransportError:
                pass
            row = {"effectId": effect_id, "nodeId": "call", "attempt": attempt, "providerKey": key}
            self.effects.setdefault(run_id, []).append({**row, "keying": "activity-recipe", "at": f"T{attempt}"})
        return httpx.Response(201, json={"runId": run_id, "effectId": effect_id})

    def verify(self, delivery: dict[str, Any]) -> bool:
        if "accept-all" in self.faults:
            return True
        headers = delivery["headers"]
        signed = f"{headers['X-openwop-Timestamp']}.{delivery['body']}".encode()
        mac = hmac.new(delivery["secret"].encode(), signed, hashlib.sha256).hexdigest()
        return hmac.compare_digest(headers["X-openwop-Signature"], f"sha256={mac}")


class OracleSchemas:
    def errors(self, name: str, document: Any) -> list[str]:
        return [error.message for error in openwop_validator(name).iter_errors(document)]

    def event_types(self) -> set[str]:
        raise AssertionError("not asked here")


def outcome(host: FakeHost, check: Callable[..., None]) -> tuple[str, str | None]:
    transport = httpx.MockTransport(host)
    session = Session("http://fake.test", "tk_fake", schemas=OracleSchemas(), transport=transport)
    found = next(c for c in (*seams.CHECKS, *core_standard.CHECKS) if c.run is check)
    row = run_check(found, session)
    return row.result, row.detail


ALL = (
    seams.fork_a_v1_run,
    seams.effect_identity_business_key,
    seams.v1_signed_webhook_accepted,
    seams.effect_seam_no_refire,
)


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.__name__)
def test_an_honest_host_passes(check: Callable[..., None]) -> None:
    assert outcome(FakeHost(), check) == ("executed-pass", None)


@pytest.mark.parametrize(
    ("fault", "check", "why"),
    [
        ("fork-drifts", seams.fork_a_v1_run, "equals the parent's"),
        ("fresh-keys", seams.effect_identity_business_key, "one provider key"),
        ("accept-all", seams.v1_signed_webhook_accepted, "wrong signature is refused"),
        ("refire", seams.effect_seam_no_refire, "the parent never did"),
    ],
)
def test_each_fault_fails_its_check(fault: str, check: Callable[..., None], why: str) -> None:
    result, detail = outcome(FakeHost(fault), check)
    assert result == "executed-fail" and why in (detail or ""), detail


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.__name__)
def test_without_the_seams_profile_the_file_is_inapplicable_and_unmounted_seams_are_blocked(
    check: Callable[..., None],
) -> None:
    result, detail = outcome(FakeHost(seams_profile=False), check)
    assert result == "inapplicable" and "seamsProfile" in (detail or "")
    result, detail = outcome(FakeHost(mounted=False), check)
    assert result == "blocked" and "/conformance/seams/" in (detail or ""), detail


def test_the_effect_seam_manifest_check() -> None:
    """The core-standard file the seams rely on: an honest manifest passes; a row that re-fires on branch without
    the branch mode fails; a host without replay is inapplicable (as Tether is today)."""
    assert outcome(FakeHost(), core_standard.effect_seam_manifest) == ("executed-pass", None)
    result, detail = outcome(FakeHost("branch-refire-unoffered"), core_standard.effect_seam_manifest)
    assert result == "executed-fail" and "branch mode" in (detail or ""), detail
    without = FakeHost()
    without.root = lambda: {"protocolVersions": ["2.0"], "preferredVersion": "2.0"}  # type: ignore[method-assign]
    assert outcome(without, core_standard.effect_seam_manifest)[0] == "inapplicable"
