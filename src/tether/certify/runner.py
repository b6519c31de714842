"""Run every floor check against a host and turn the rows into a signed bundle that says what held.

A profile is certified only when its predicate holds on the captured v2 root, every one
of its floor rows passed, no row of the whole run is ``blocked``, and no relaxation the
host ran under touches it. Anything less is stated, row by row, with its reason.

To add a check: write a function of a ``Leg`` in the module of its profile and list it in
that module's ``CHECKS``; the runner, the bundle and the profile verdicts take it from there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tether import __version__, clock
from tether.certify import bundle, core_standard, core_streams, discovery_core, seams
from tether.certify.ledger import Blocked, Check, Row, run_check
from tether.certify.session import Session, enc

__all__ = ["CHECKS", "PROFILES", "Build", "certify", "profile_verdicts", "egress_relaxation", "run_checks"]

#: every floor check, in the order they run
CHECKS: tuple[Check, ...] = (*discovery_core.CHECKS, *core_standard.CHECKS, *core_streams.CHECKS, *seams.CHECKS)

Predicate = Callable[[Mapping[str, Any]], bool]


def _families(*names: str) -> Predicate:
    return lambda doc: all(isinstance(doc.get(name), dict) for name in names)


#: each profile's predicate over the v2 root (``spec/v2/profiles.json``)
PROFILES: dict[str, Predicate] = {
    discovery_core.PROFILE: lambda doc: "protocolVersions" in doc and "preferredVersion" in doc,
    core_standard.PROFILE: _families("interrupt", "replay", "webhooks", "idempotency", "eventLog"),
    seams.PROFILE: lambda doc: isinstance(doc.get("conformance"), dict),
}

#: what the bundle says ran: Tether's own replica of the floor, never the official suite
SUITE_NAME = "tether-certify"


@dataclass(frozen=True)
class Build:
    """What the bundle attributes to: ``commit``, ``image-digest`` or ``artifact-sha256``, and its id."""

    kind: str
    id: str


def run_checks(session: Session, checks: Sequence[Check] = CHECKS, skip: frozenset[str] = frozenset()) -> list[Row]:
    """Each check's row, in order; a skipped one says the operator skipped it."""
    rows: list[Row] = []
    for check in checks:
        if check.scenario in skip:
            rows.append(Row(check.row_id, check.file, "skipped", 0, "skipped by the operator (--skip)"))
        else:
            rows.append(run_check(check, session))
    return rows


#: where a host with its egress guard fully on refuses to deliver: loopback, and a private range
PRIVATE_PROBES = ("https://127.0.0.1:9/tether-certify-egress-probe", "https://10.0.0.1:9/tether-certify-egress-probe")


def egress_relaxation(session: Session) -> dict[str, str] | None:
    """The relaxation the host runs under when it takes a webhook to a non-public address.

    The floor wants the egress guard fully on (a public https receiver); a host started with
    ``--egress-allow-cidr`` for a loopback receiver admits such a subscription, and that is a
    relaxation the bundle must state, whether or not the operator declares it. Each probe
    subscription is removed at once; nothing is ever delivered to it (no run is started).
    """
    admitted = []
    with session.client(session.key) as drv:
        for url in PRIVATE_PROBES:
            answer = drv.post("/webhooks", json={"url": url, "events": ["run.completed"]})
            if answer.status_code == 201:
                admitted.append(url)
                drv.delete(f"/webhooks/{enc(answer.json()['webhookId'])}")
    if not admitted:
        return None
    return {
        "obligation": "webhooks.egress-guard",
        "durability": "deployment",
        "reason": f"the host accepts webhooks to non-public addresses ({', '.join(admitted)}): its egress guard "
        "is relaxed (--egress-allow-cidr), as for a loopback test receiver; the floor wants a public https "
        "receiver with the guard fully on",
    }


def profile_verdicts(
    document: Mapping[str, Any], rows: Sequence[Row], relaxations: Sequence[Mapping[str, Any]], checks: Sequence[Check]
) -> list[dict[str, Any]]:
    """``claimedProfiles[]``: each profile, how many of its floor rows passed, and whether it is certified."""
    by_id = {row.id: row for row in rows}
    blocked = any(row.result == "blocked" for row in rows)
    relaxed = {bundle.relaxed_profile(str(r["obligation"])) for r in relaxations}
    verdicts = []
    for profile, predicate in PROFILES.items():
        floor = [by_id[c.row_id] for c in checks if c.profile == profile and c.row_id in by_id]
        passed = [row for row in floor if row.result == "executed-pass"]
        certified = predicate(document) and bool(floor) and len(passed) == len(floor) and not blocked
        verdicts.append(
            {
                "id": profile,
                "evidenceTier": "self",
                "witnessCount": len(passed),
                "certified": certified and profile not in relaxed,
            }
        )
    return verdicts


def certify(
    session: Session,
    *,
    build: Build,
    signer: tuple[Ed25519PrivateKey, str],
    relaxations: Sequence[Mapping[str, str]] = (),
    checks: Sequence[Check] = CHECKS,
    skip: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Run the checks against ``session``'s host and return the signed bundle."""
    try:
        document = session.discovery()
    except Blocked as exc:
        raise RuntimeError(f"cannot certify {session.url}: {exc}") from exc
    rows = run_checks(session, checks, skip)
    declared = [dict(r) for r in relaxations]
    implied = egress_relaxation(session)
    if implied is not None and implied not in declared:
        declared.append(implied)
    implementation = document.get("implementation") or {}
    host: dict[str, Any] = {
        "name": str(implementation.get("name") or "unknown"),
        "version": str(implementation.get("version") or "unknown"),
        "build": {"kind": build.kind, "id": build.id},
    }
    if implementation.get("vendor"):
        host["vendor"] = str(implementation["vendor"])
    if declared:
        host["relaxations"] = declared
    unsigned = bundle.build(
        suite={"name": SUITE_NAME, "version": __version__, "targetMajor": 2, "specArtifactsVersion": "none"},
        host=host,
        discovery_url=session.url.rstrip("/") + "/.well-known/openwop",
        document=document,
        profiles=profile_verdicts(document, rows, declared, checks),
        rows=rows,
        generated_at=clock.now_iso(),
    )
    key, key_id = signer
    return bundle.sign(unsigned, key, key_id)
