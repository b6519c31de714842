"""``openwop-core-standard``'s floor files, but the two long ones (webhooks, SSE: ``core_streams``).

Each function is one floor file's legs, as ``tests/v2/test_conformance_floor.py`` replays
them; its docstring says what the file asserts.
"""

from __future__ import annotations

import base64
import re
import secrets
from typing import Any

from tether.certify._driver import (
    CANCELLABLE,
    DELAY,
    FOREIGN_RUN_ID,
    NOOP,
    code_of,
    created,
    fixture_listed,
    noop_settled,
    poll,
    settled,
    status_of,
)
from tether.certify.ledger import Check, Leg
from tether.certify.session import TERMINAL, enc

PROFILE = "openwop-core-standard"

#: the vendor event-type grammar (its org must be named in the root's ``extensions``)
VENDOR_TYPE = re.compile(
    r"^(?!openwop\.)[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9]*(-[a-z0-9]+)*(\.[a-z][a-z0-9]*(-[a-z0-9]+)*)?$"
)
UNPREFIXED = "b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef"
UNHELD_KID = "ow2.hs256.nokid.b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef"


def interrupt_token_scheme(leg: Leg) -> None:
    """An unprefixed token is 401 ``interrupt_token_invalid`` or 404; an ``ow2.`` token under an unheld kid is 401."""
    with leg.session.client() as anon:
        unprefixed = anon.get(f"/interrupts/{enc(UNPREFIXED)}")
        unheld = anon.get(f"/interrupts/{enc(UNHELD_KID)}")
    leg.expect(unprefixed.status_code in (401, 404), f"an unprefixed token is 401 or 404, not {unprefixed.status_code}")
    if unprefixed.status_code == 401:
        leg.equal(code_of(unprefixed), "interrupt_token_invalid", "the unprefixed token's code")
    else:
        leg.expect(code_of(unprefixed) in ("not_found", "interrupt_not_found"), "the unprefixed token's 404 code")
    if unprefixed.status_code == 404 and unheld.status_code == 404:
        leg.inapplicable("both probes answered 404")
    leg.equal((unheld.status_code, code_of(unheld)), (401, "interrupt_token_invalid"), "an ow2. token, unheld kid")
    leg.valid("v2/error-envelope", unheld.json(), "the refusal")


#: the kinds of outbound effect a manifest row may declare
SEAM_KINDS = ("http", "queue", "storage", "provider-sdk", "webhook-fanout")


def effect_seam_manifest(leg: Leg) -> None:
    """``GET /host/effect-seams`` validates, lists at least one seam, every row guarded with a ``guardedBy`` and of a
    known kind, a ``branchReFires`` row only with the ``branch`` mode; the facet names the constant address."""
    doc = leg.session.discovery()
    replay = doc.get("replay")
    if not isinstance(replay, dict):
        leg.inapplicable("the replay family is not advertised: this host does not serve replay and the effect ledger")
    with leg.session.client(leg.session.key) as drv:
        answer = drv.get("/host/effect-seams")
    leg.equal(answer.status_code, 200, "GET /host/effect-seams")
    manifest: Any = answer.json()
    leg.valid("v2/effect-seam-manifest", manifest, "the effect-seam manifest")
    rows = manifest.get("seams") if isinstance(manifest, dict) else None
    leg.expect(isinstance(rows, list) and rows, "the manifest lists at least one seam")
    modes: list[Any] = replay["modes"] if isinstance(replay.get("modes"), list) else []
    for row in rows or []:
        name = row.get("seam")
        leg.expect(row.get("guarded") is True, f"seam {name!r} is guarded")
        leg.expect(isinstance(row.get("guardedBy"), str) and row["guardedBy"], f"seam {name!r} names its guard")
        leg.expect(row.get("kind") in SEAM_KINDS, f"seam {name!r} is of a known kind, not {row.get('kind')!r}")
        if row.get("branchReFires") is True:
            leg.expect("branch" in modes, f"seam {name!r} re-fires on branch, so the branch mode is offered")
    leg.equal(replay.get("effectSeamsManifest"), "/host/effect-seams", "replay.effectSeamsManifest")


def idempotency_key_grammar(leg: Leg) -> None:
    """A 22-character key creates (201); ``Idempotency-Key: short`` is ``400 idempotency_key_invalid``."""
    good = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
    with leg.session.client(leg.session.key) as drv:
        first = drv.post("/runs", json={"workflowId": NOOP}, headers={"Idempotency-Key": good})
        short = drv.post("/runs", json={"workflowId": NOOP}, headers={"Idempotency-Key": "short"})
    leg.equal(first.status_code, 201, "a 22-character key")
    leg.equal((short.status_code, code_of(short)), (400, "idempotency_key_invalid"), "Idempotency-Key: short")
    leg.valid("v2/error-envelope", short.json(), "the refusal")


def era_key(leg: Leg) -> None:
    """A new run's snapshot and the root both say ``eventLogSchemaVersion: 3``."""
    doc = leg.session.discovery()
    with leg.session.client(leg.session.key) as drv:
        run_id = created(drv, {"workflowId": NOOP})
        snapshot = drv.get(f"/runs/{enc(run_id)}")
        leg.equal(snapshot.status_code, 200, "reading a new run")
        leg.equal(snapshot.json().get("eventLogSchemaVersion"), 3, "a new run's era")
        era = doc.get("eventLogSchemaVersion")
        leg.expect(isinstance(era, int) and not isinstance(era, bool) and era == 3, "the root's era is the integer 3")
        fresh = created(drv, {"workflowId": NOOP})
        leg.equal(drv.get(f"/runs/{enc(fresh)}").json().get("eventLogSchemaVersion"), era, "a fresh run's era")


def era_stamp_universal(leg: Leg) -> None:
    """The root's integer era stamps a fresh run's snapshot; with the root at 3, a fresh run reads 3."""
    doc = leg.session.discovery()
    if "eventLogSchemaVersion" not in doc:
        leg.inapplicable("the root has no eventLogSchemaVersion")
    era = doc["eventLogSchemaVersion"]
    leg.expect(isinstance(era, int) and not isinstance(era, bool), "the root's era is an integer")
    with leg.session.client(leg.session.key) as drv:
        run_id = created(drv, {"workflowId": NOOP, "inputs": {}})
        leg.equal(drv.get(f"/runs/{enc(run_id)}").json().get("eventLogSchemaVersion"), era, "a run's era")
        if era != 3:
            leg.inapplicable("leg 2 needs the root at 3")
        fresh = created(drv, {"workflowId": NOOP, "inputs": {}})
        leg.equal(drv.get(f"/runs/{enc(fresh)}").json().get("eventLogSchemaVersion"), 3, "a fresh run's era")


def event_type_closed(leg: Leg) -> None:
    """Every polled event's type is registered (or a vendor type of an org the root names) and validates."""
    doc = leg.session.discovery()
    schemas = leg.session.schemas
    if schemas is None:
        leg.blocked("no official schemas were given (--schemas DIR), so the registered types are unknown")
    known = schemas.event_types()
    orgs = {name.split(".")[0] for name in (doc.get("extensions") or {})}
    with leg.session.client(leg.session.key) as drv:
        events = poll(drv, noop_settled(drv))["events"]
    leg.expect(events, "a settled noop run has events")
    last = -1
    for event in events:
        kind = event.get("type")
        vendor = VENDOR_TYPE.fullmatch(str(kind)) and str(kind).split(".")[0] in orgs
        leg.expect(kind in known or vendor, f"event type {kind!r} is registered")
        leg.valid("v2/run-event", event, f"event {event.get('sequence')}")
        leg.expect(isinstance(event.get("sequence"), int) and event["sequence"] > last, "sequences rise strictly")
        last = event["sequence"]


def poll_cursor_v2(leg: Leg) -> None:
    """The poll shape; the first sequence is 0; ``afterSequence`` is exclusive; past the end is ``[]``."""
    with leg.session.client(leg.session.key) as drv:
        run_id = noop_settled(drv)
        page = poll(drv, run_id)
        leg.equal(sorted(page), ["events", "isTerminal", "lastSequence", "runId", "status"], "the poll answer's keys")
        leg.equal(page["runId"], run_id, "the poll answer's runId")
        leg.expect(isinstance(page["events"], list), "events is a list")
        last = page["lastSequence"]
        leg.expect(isinstance(last, int) and last >= -1, "lastSequence is an integer, at least -1")
        leg.expect(isinstance(page["status"], str) and isinstance(page["isTerminal"], bool), "status and isTerminal")
        sequences = [e["sequence"] for e in page["events"]]
        leg.expect(sequences and max(sequences) <= last, "no event past lastSequence")
        leg.equal(sequences[0], 0, "the first sequence")
        first = sequences[0]
        after = poll(drv, run_id, f"&afterSequence={first}")
        leg.expect(all(e["sequence"] > first for e in after["events"]), "afterSequence is exclusive")
        again = poll(drv, run_id)["events"]
        leg.equal(after["events"], [e for e in again if e["sequence"] > first], "afterSequence skips only up to it")
        past = poll(drv, run_id, f"&afterSequence={page['lastSequence'] + 1000}")
        leg.equal(past["events"], [], "past the end")


def run_cancel(leg: Leg) -> None:
    """Cancelling a settled run is ``409 run_terminal``; a running ``conformance-cancellable`` run cancels in 5 s."""
    with leg.session.client(leg.session.key) as drv:
        done = noop_settled(drv)
        again = drv.post(f"/runs/{enc(done)}/cancel", json={})
        leg.equal((again.status_code, code_of(again)), (409, "run_terminal"), "cancelling a settled run")
        leg.valid("v2/error-envelope", again.json(), "the refusal")
        fixture_listed(leg.session.discovery(), CANCELLABLE)
        run_id = created(drv, {"workflowId": CANCELLABLE, "inputs": {"delayMs": 15000}})
        settled(drv, run_id, "running", timeout=5.0)
        answer = drv.post(f"/runs/{enc(run_id)}/cancel", json={"reason": "conformance"})
        leg.equal(answer.status_code, 200, "cancelling a running run")
        leg.equal(answer.json().get("runId"), run_id, "the cancel answer's runId")
        leg.expect(answer.json().get("status") in ("cancelling", "cancelled"), "the cancel answer's status")
        settled(drv, run_id, "cancelled", timeout=5.0)
        leg.expect("run.cancelled" in [e["type"] for e in poll(drv, run_id)["events"]], "the log has run.cancelled")


def run_bulk_cancel(leg: Leg) -> None:
    """101 ids is 400 with ``details.maxRunIds``; ``[a, foreign, b]`` answers in order, the foreign one not ok."""
    with leg.session.client(leg.session.key) as drv:
        ids = [f"openwop-conformance-bulk-cap/opaque{i:03d}0123456789abcdef" for i in range(101)]
        capped = drv.post("/runs:bulk-cancel", json={"runIds": ids})
        if capped.status_code == 404:
            leg.blocked("bulk-cancel is not mounted")
        leg.equal((capped.status_code, code_of(capped)), (400, "validation_error"), "101 ids")
        leg.valid("v2/error-envelope", capped.json(), "the refusal")
        limit = (capped.json().get("details") or {}).get("maxRunIds")
        leg.expect(isinstance(limit, int) and 1 <= limit <= 100, "details.maxRunIds is in 1..100")
        named = [created(drv, {"workflowId": NOOP}), FOREIGN_RUN_ID, created(drv, {"workflowId": NOOP})]
        answer = drv.post("/runs:bulk-cancel", json={"runIds": named, "reason": "conformance"})
    leg.equal(answer.status_code, 200, "bulk cancel")
    results = answer.json().get("results") or []
    leg.equal(len(results), 3, "one result per id")
    leg.equal([r.get("runId") for r in results], named, "results in request order")
    leg.expect(results[1].get("ok") is False, "the foreign entry is ok: false")
    leg.valid("v2/error-envelope", results[1].get("error"), "the foreign entry's error")
    leg.expect(results[1]["error"].get("error") in ("id_tenant_mismatch", "not_found"), "the foreign entry's code")
    for own in (results[0], results[2]):
        ok = own.get("ok") and own.get("status") in ("cancelling", "cancelled")
        leg.expect(ok or (own.get("error") or {}).get("error") == "run_terminal", f"own entry {own.get('runId')}")


def run_pause_resume(leg: Leg) -> None:
    """Settled: pause/resume are ``409 run_terminal``; ``conformance-delay``: 202 paused, 409 paused, 202 running."""
    with leg.session.client(leg.session.key) as drv:
        done = noop_settled(drv)
        pause = drv.post(f"/runs/{enc(done)}:pause", json={})
        if pause.status_code == 404:
            leg.blocked("pause is not mounted")
        leg.equal((pause.status_code, code_of(pause)), (409, "run_terminal"), "pausing a settled run")
        resume = drv.post(f"/runs/{enc(done)}:resume", json={})
        leg.equal((resume.status_code, code_of(resume)), (409, "run_terminal"), "resuming a settled run")
        fixture_listed(leg.session.discovery(), DELAY)
        run_id = created(drv, {"workflowId": DELAY, "inputs": {"delayMs": 15000}})
        try:
            settled(drv, run_id, "running", *TERMINAL, timeout=5.0)
            if status_of(drv, run_id) != "running":
                leg.blocked("conformance-delay did not run")
            paused = drv.post(f"/runs/{enc(run_id)}:pause", json={"reason": "conformance", "drainPolicy": "immediate"})
            leg.equal((paused.status_code, paused.json().get("status")), (202, "paused"), "pausing a running run")
            leg.equal(paused.json().get("runId"), run_id, "the pause answer's runId")
            twice = drv.post(f"/runs/{enc(run_id)}:pause", json={})
            leg.equal((twice.status_code, code_of(twice)), (409, "run_state_conflict"), "pausing twice")
            leg.equal((twice.json().get("details") or {}).get("runStatus"), "paused", "details.runStatus")
            resumed = drv.post(f"/runs/{enc(run_id)}:resume", json={"reason": "conformance"})
            leg.equal((resumed.status_code, resumed.json().get("status")), (202, "running"), "resuming")
            types = [e["type"] for e in poll(drv, run_id)["events"]]
            leg.expect("run.paused" in types, "the log has run.paused")
            leg.expect("run.resumed" in types[types.index("run.paused") + 1 :], "then run.resumed")
        finally:
            drv.post(f"/runs/{enc(run_id)}/cancel", json={"reason": "conformance cleanup"})


def run_options_limits(leg: Leg) -> None:
    """101 tags, a 257-character tag, an unknown root key: 400; odd tags and nested metadata round-trip."""
    with leg.session.client(leg.session.key) as drv:
        for extra in ({"tags": [f"t{i}" for i in range(101)]}, {"tags": ["y" * 257]}, {"conformanceUnknownRootKey": 1}):
            answer = drv.post("/runs", json={"workflowId": NOOP, **extra})
            what = f"a run with {next(iter(extra))}"
            leg.equal((answer.status_code, code_of(answer)), (400, "validation_error"), what)
            leg.valid("v2/error-envelope", answer.json(), what)
        tags = ["has space", "emoji \U0001f680", "slash/colon:pipe|", "UPPER-and_under", "x" * 256]
        metadata = {"nested": {"a": 1, "b": [1, "2", None, True]}, "s": "unicode \u221e ok", "n": 0}
        run_id = created(drv, {"workflowId": NOOP, "tags": tags, "metadata": metadata})
        read = drv.get(f"/runs/{enc(run_id)}")
    leg.equal(read.status_code, 200, "reading the run")
    snapshot = read.json()
    leg.equal(snapshot.get("tags"), tags, "tags read back")
    leg.equal(snapshot.get("metadata"), metadata, "metadata reads back")


CHECKS = (
    Check("v2-interrupt-token-scheme", PROFILE, interrupt_token_scheme),
    Check("v2-effect-seam-manifest", PROFILE, effect_seam_manifest),
    Check("v2-idempotency-key-grammar", PROFILE, idempotency_key_grammar),
    Check("v2-era-key", PROFILE, era_key),
    Check("v2-era-stamp-universal", PROFILE, era_stamp_universal),
    Check("v2-event-type-closed", PROFILE, event_type_closed),
    Check("v2-poll-cursor-v2", PROFILE, poll_cursor_v2),
    Check("v2-run-cancel", PROFILE, run_cancel),
    Check("v2-run-bulk-cancel", PROFILE, run_bulk_cancel),
    Check("v2-run-pause-resume", PROFILE, run_pause_resume),
    Check("v2-run-options-limits", PROFILE, run_options_limits),
)
