"""``openwop-conformance-seams-v2``'s four floor files, driven through the seams under ``/conformance/seams/``.

Each file is gated on the seams profile (the root's ``conformance.seamsProfile``) and on
its family (fork and no-refire: ``replay``; business key: ``idempotency``; the signed
webhook: ``webhooks``): a host that advertises neither gets an ``inapplicable`` row saying
which. A host that advertises both but answers a seam with 404, 403 or 405, or outside the
seam's contract, gets ``blocked`` naming the seam, never a pass.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections import Counter
from typing import Any

import httpx

from tether.certify._driver import poll
from tether.certify._provider import EffectProvider
from tether.certify.ledger import Check, Failed, Leg
from tether.certify.session import enc, wait_for

PROFILE = "openwop-conformance-seams-v2"
SEAMS_PROFILE = "openwop-conformance-seams-v2"
SEAMS = "/conformance/seams"
LEGACY_ISSUER = "urn:openwop:legacy"
KEYINGS = ("business-identity", "activity-recipe")


def _gated(leg: Leg, family: str) -> dict[str, Any]:
    doc = leg.session.discovery()
    if not isinstance(doc.get(family), dict):
        leg.inapplicable(f"the {family} family is not advertised, and this file exercises it")
    conformance = doc.get("conformance")
    if not isinstance(conformance, dict) or conformance.get("seamsProfile") != SEAMS_PROFILE:
        leg.inapplicable(f"the root does not advertise conformance.seamsProfile {SEAMS_PROFILE!r}: no v2 seams mounted")
    return doc


def _seam(leg: Leg, drv: httpx.Client, path: str, body: dict[str, Any], wanted: tuple[str, ...]) -> dict[str, Any]:
    """POST a seam; its 2xx JSON body with ``wanted`` members, or ``blocked`` naming the seam."""
    answer = drv.post(f"{SEAMS}/{path}", json=body)
    if answer.status_code in (403, 404, 405):
        leg.blocked(f"the host advertises the seams profile but does not serve {SEAMS}/{path} ({answer.status_code})")
    reply: Any = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else None
    if not 200 <= answer.status_code < 300 or not isinstance(reply, dict) or any(k not in reply for k in wanted):
        leg.blocked(f"{SEAMS}/{path} answered {answer.status_code} without {{{', '.join(wanted)}}}")
    return reply


def _effects(leg: Leg, drv: httpx.Client, run_id: str, which: str) -> list[dict[str, Any]]:
    answer = drv.get(f"/runs/{enc(run_id)}/effects")
    if answer.status_code != 200:
        leg.blocked(f"GET /runs/{{runId}}/effects answered {answer.status_code} on {which}")
    rows = answer.json().get("effects")
    return rows if isinstance(rows, list) else []


def _fork(leg: Leg, drv: httpx.Client, run_id: str, body: dict[str, Any], *, refusal_fails: bool) -> str:
    answer = drv.post(f"/runs/{enc(run_id)}:fork", json=body)
    fork_id = answer.json().get("runId") if answer.status_code == 201 else None
    if refusal_fails:
        leg.expect(isinstance(fork_id, str), f"the fork of {run_id} is made (201 {{runId}}), not {answer.status_code}")
    elif not isinstance(fork_id, str):
        leg.blocked(f"POST /runs/{{runId}}:fork answered {answer.status_code} without a runId")
    return str(fork_id)


def _observable(event: dict[str, Any]) -> str:
    """What byte-equivalence compares: type, sequence and payload (clock fields and minted ids aside)."""
    return json.dumps([event.get("type"), event.get("sequence"), event.get("payload")], sort_keys=True)


def _v1_log() -> list[dict[str, Any]]:
    """An era-2 log in v1 vocabulary: two renamed types between run.started (no owner) and run.completed."""
    at = [f"2026-01-15T10:00:0{i}.000Z" for i in range(4)]
    tool = {"agentId": "conformance-agent", "toolName": "echo", "callId": "call-0001"}
    return [
        {"type": "run.started", "sequence": 0, "payload": {"workflowId": "conformance-noop"}, "timestamp": at[0]},
        {"type": "agent.toolCalled", "sequence": 1, "payload": tool, "timestamp": at[1]},
        {"type": "agent.toolReturned", "sequence": 2, "payload": {**tool, "status": "ok"}, "timestamp": at[2]},
        {"type": "run.completed", "sequence": 3, "payload": {"durationMs": 3000}, "timestamp": at[3]},
    ]


def fork_a_v1_run(leg: Leg) -> None:
    """A seeded era-2 run forks in replay mode; the fork's prefix equals the translated parent's; both ``run.started``
    carry the legacy issuer."""
    _gated(leg, "replay")
    log = _v1_log()
    from_seq = max(e["sequence"] for e in log)
    with leg.session.client(leg.session.key) as drv:
        seeded = _seam(
            leg,
            drv,
            "sample/event-log/seed",
            {"eventLogSchemaVersion": 2, "status": "completed", "events": log},
            ("runId",),
        )
        parent = poll(drv, str(seeded["runId"]))["events"]
        fork_id = _fork(leg, drv, str(seeded["runId"]), {"mode": "replay", "fromSeq": from_seq}, refusal_fails=True)
        fork = poll(drv, fork_id)["events"]

    def prefix(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(
            (e for e in events if isinstance(e.get("sequence"), int) and e["sequence"] < from_seq),
            key=lambda e: e["sequence"],
        )

    leg.equal(len(prefix(parent)), from_seq, "the translated parent's prefix")
    leg.equal(len(prefix(fork)), from_seq, "the fork's inherited prefix")
    for mine, theirs in zip(prefix(fork), prefix(parent)):
        leg.equal(_observable(mine), _observable(theirs), f"the fork's row {theirs['sequence']} equals the parent's")
    for name, events in (("the fork", fork), ("the parent", parent)):
        started = next((e for e in events if e.get("type") == "run.started"), None)
        leg.expect(started is not None, f"{name} has run.started")
        subject = ((started or {}).get("payload") or {}).get("owner", {}).get("subject") or {}
        leg.equal(subject.get("issuer"), LEGACY_ISSUER, f"{name}'s run.started owner.subject.issuer")


def effect_identity_business_key(leg: Leg) -> None:
    """One effect retried at transport level: every attempt records one provider key and one keying, and the provider
    sees that same ``Idempotency-Key`` on the wire."""
    _gated(leg, "idempotency")
    certfile, keyfile = leg.session.provider_tls or (None, None)
    provider = EffectProvider(fail_first=1, certfile=certfile, keyfile=keyfile)
    with provider, leg.session.client(leg.session.key) as drv:
        fired = _seam(
            leg, drv, "sample/test/idempotency/effect-retry", {"providerUrl": provider.url}, ("runId", "effectId")
        )
        rows = _effects(leg, drv, str(fired["runId"]), "the effect-retry run")
        attempts = [r for r in rows if r.get("effectId") == fired["effectId"]]
        if len(attempts) < 2:
            leg.blocked(
                f"the seam left {len(attempts)} ledger row(s) for effect {fired['effectId']}; a retry needs two"
            )
        for attempt in attempts:
            key = attempt.get("providerKey")
            leg.expect(isinstance(key, str) and key, f"attempt {attempt.get('attempt')} records its provider key")
            leg.expect(
                attempt.get("keying") in KEYINGS, f"attempt {attempt.get('attempt')} declares a documented keying"
            )
        keys = {a.get("providerKey") for a in attempts}
        leg.equal(len(keys), 1, "one provider key across the attempts")
        leg.equal(len({a.get("keying") for a in attempts}), 1, "one keying across the attempts")
        try:
            wait_for(lambda: len(provider.arrivals()) >= 2, timeout=10.0, what="two attempts at the provider")
        except Failed:
            leg.blocked(
                f"the provider saw {len(provider.arrivals())} attempt(s) while the ledger records {len(attempts)}"
            )
        wire = provider.arrivals()
    for key in wire:
        leg.expect(key, "every attempt on the wire carries an Idempotency-Key")
    leg.equal(len(set(wire)), 1, "one Idempotency-Key on the wire")
    leg.equal(wire[0], next(iter(keys)), "the key the ledger records is the key the provider received")


def _v1_delivery(secret: str, body: str, *, tamper: bool = False) -> dict[str, Any]:
    timestamp = str(int(time.time()))
    mac = hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
    if tamper:
        mac = ("1" if mac[0] == "0" else "0") + mac[1:]
    headers = {
        "X-openwop-Webhook-Id": "wh-conformance-v1-signed",
        "X-openwop-Event-Type": "run.completed",
        "X-openwop-Timestamp": timestamp,
        "X-openwop-Signature": f"sha256={mac}",
        "X-openwop-Signature-Algorithm": "v1",
    }
    return {"secret": secret, "headers": headers, "body": body}


def v1_signed_webhook_accepted(leg: Leg) -> None:
    """The host's receiver accepts an ``X-openwop-*``-only scheme-v1 delivery, and refuses it with one byte changed."""
    _gated(leg, "webhooks")
    secret = f"conformance-secret-{int(time.time() * 1000):x}"
    event = {"type": "run.completed", "sequence": 3, "payload": {"durationMs": 1}}
    body = json.dumps({"runId": "run-conformance-v1-signed", "event": event})
    with leg.session.client(leg.session.key) as drv:
        good = _seam(leg, drv, "sample/webhooks/receive", _v1_delivery(secret, body), ("accepted",))
        leg.expect(good["accepted"] is True, f"an X-openwop-* v1 delivery is accepted ({good.get('reason')})")
        bad = _seam(leg, drv, "sample/webhooks/receive", _v1_delivery(secret, body, tamper=True), ("accepted",))
        leg.expect(bad["accepted"] is False, "the same delivery with a wrong signature is refused")


def effect_seam_no_refire(leg: Leg) -> None:
    """A guarded seam fired inside a run is not fired again by a replay fork: the fork's ledger has no attempt the
    parent never made."""
    _gated(leg, "replay")
    with leg.session.client(leg.session.key) as drv:
        manifest = drv.get("/host/effect-seams")
        rows = manifest.json().get("seams") if manifest.status_code == 200 else None
        target = next((r for r in rows or [] if r.get("guarded") is True), None)
        if target is None:
            leg.inapplicable("no effect-seam manifest row is guarded: nothing to witness suppression on")
        fired = _seam(leg, drv, "sample/effect-seams/fire", {"seam": str(target.get("seam"))}, ("runId",))
        parent = _effects(leg, drv, str(fired["runId"]), "the fired run")
        if not parent:
            leg.blocked("the fired run's effect ledger is empty, so a fork reading empty too would witness nothing")
        fork_id = _fork(leg, drv, str(fired["runId"]), {"mode": "replay"}, refusal_fails=False)
        forked = _effects(leg, drv, fork_id, "the replay fork")

    def attempt(row: dict[str, Any]) -> str:
        return f"{row.get('nodeId')}|{row.get('attempt')}|{row.get('at')}"

    inherited = Counter(attempt(r) for r in parent)
    refired = []
    for row in forked:
        if inherited[attempt(row)] > 0:
            inherited[attempt(row)] -= 1
        else:
            refired.append(row)
    leg.equal(refired, [], f"seam {target.get('seam')!r}: attempts the replay fork made that the parent never did")


CHECKS = (
    Check("v2-fork-a-v1-run", PROFILE, fork_a_v1_run),
    Check("v2-effect-identity-business-key", PROFILE, effect_identity_business_key),
    Check("v2-v1-signed-webhook-accepted", PROFILE, v1_signed_webhook_accepted),
    Check("v2-effect-seam-no-refire", PROFILE, effect_seam_no_refire),
)
