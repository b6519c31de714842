"""The certification bundle v3: what it holds, how it is digested and signed, and how a reader verifies it.

Digests and the signature are over RFC 8785 (JCS) bytes, as the v2 conformance text says:

- ``discovery.sha256``: SHA-256 of the captured v2 root;
- ``witnessSha256``: SHA-256 of the rows, sorted by id (UTF-16 code units; our ids are
  ASCII), each with ``id``, ``scenario``, ``result`` and, when present, ``assertions`` and
  ``detail``; when the host declares relaxations, of ``{rows, relaxations}`` instead, so a
  relaxation cannot be stripped from a signed bundle;
- ``signature.sig``: Ed25519 over ``{"witnessSha256", "host.build", "suite.version",
  "discovery.sha256"}`` (those four names, as ``signature.over`` lists them), unpadded
  base64url.

The suite is named for what it is, Tether's own check (``tether-certify``), not the
official ``@openwop/openwop-conformance``; the official schema holds that name as a
constant, so a ``tether-certify`` bundle differs from the schema there and only there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tether.auth.signing_keys import b64url, public_key, unb64url
from tether.certify.ledger import Row

__all__ = ["SIGNATURE_OVER", "attestation", "build", "canonical", "relaxed_profile", "sign", "verify", "witness_sha256"]

SIGNATURE_OVER = ["witnessSha256", "host.build", "suite.version", "discovery.sha256"]
TOTAL_KEYS = {
    "executed-pass": "executedPass",
    "executed-fail": "executedFail",
    "skipped": "skipped",
    "inapplicable": "inapplicable",
    "blocked": "blocked",
}


def canonical(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON value."""
    return rfc8785.dumps(value)


def _sha256(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def witness_sha256(rows: Iterable[Mapping[str, Any]], relaxations: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The digest of the requirement rows (and the declared relaxations, when there are any)."""
    kept = ("id", "scenario", "result", "assertions", "detail", "evidence")
    ordered = sorted(rows, key=lambda row: str(row["id"]).encode("utf-16-be"))
    preimage: Any = [{k: row[k] for k in kept if k in row} for row in ordered]
    if relaxations:
        preimage = {"rows": preimage, "relaxations": list(relaxations)}
    return _sha256(preimage)


def attestation(bundle: Mapping[str, Any]) -> bytes:
    """The bytes the signature covers."""
    return canonical(
        {
            "witnessSha256": bundle["witnessSha256"],
            "host.build": bundle["host"]["build"],
            "suite.version": bundle["suite"]["version"],
            "discovery.sha256": bundle["discovery"]["sha256"],
        }
    )


def build(
    *,
    suite: dict[str, Any],
    host: dict[str, Any],
    discovery_url: str,
    document: dict[str, Any],
    profiles: list[dict[str, Any]],
    rows: Sequence[Row],
    generated_at: str,
) -> dict[str, Any]:
    """The unsigned bundle (``signature`` is added by ``sign``)."""
    documents = [row.document() for row in rows]
    totals = dict.fromkeys(TOTAL_KEYS.values(), 0)
    for row in rows:
        totals[TOTAL_KEYS[row.result]] += 1
    bundle: dict[str, Any] = {
        "bundleVersion": "3",
        "generatedAt": generated_at,
        "suite": suite,
        "host": host,
        "discovery": {
            "url": discovery_url,
            "sha256": _sha256(document),
            "protocolVersions": list(document.get("protocolVersions") or []),
            "preferredVersion": str(document.get("preferredVersion", "")),
            "document": document,
        },
        "claimedProfiles": profiles,
        "results": {"totals": totals, "requirements": documents},
        "witnessSha256": witness_sha256(documents, host.get("relaxations")),
        "assertionCount": sum(row.assertions for row in rows),
    }
    non_pass = [{"id": r.id, "result": r.result, "reason": r.detail or ""} for r in rows if r.result != "executed-pass"]
    if non_pass:
        bundle["detail"] = {"nonPass": non_pass}
    return bundle


def sign(bundle: dict[str, Any], key: Ed25519PrivateKey, key_id: str) -> dict[str, Any]:
    """``bundle`` with its signature (and ``host.signingKeyId``) set."""
    bundle["host"]["signingKeyId"] = key_id
    sig = b64url(key.sign(attestation(bundle)))
    bundle["signature"] = {"alg": "ed25519", "keyId": key_id, "sig": sig, "over": list(SIGNATURE_OVER)}
    return bundle


def verify(bundle: Mapping[str, Any], signing_keys: Sequence[Mapping[str, Any]]) -> list[str]:
    """What is wrong with ``bundle`` read against the host's published ``signingKeys[]`` (empty: it verifies).

    The checks a reader makes: the totals, witness digest and assertion count agree with the
    rows; every non-pass row has a reason and every pass an assertion; the signature names
    a published key and verifies under it; and nothing is certified with a blocked row or
    under a relaxation.
    """
    problems: list[str] = []
    rows = list(bundle.get("results", {}).get("requirements") or [])
    for row in rows:
        if row.get("result") != "executed-pass" and not str(row.get("detail") or "").strip():
            problems.append(f"{row.get('id')}: {row.get('result')} without a reason")
        if row.get("result") == "executed-pass" and not row.get("assertions"):
            problems.append(f"{row.get('id')}: a pass with no assertion")
    counted = dict.fromkeys(TOTAL_KEYS.values(), 0)
    for row in rows:
        counted[TOTAL_KEYS.get(str(row.get("result")), "executedFail")] += 1
    if bundle.get("results", {}).get("totals") != counted:
        problems.append(f"the totals are not the rows' ({counted})")
    if bundle.get("witnessSha256") != witness_sha256(rows, bundle.get("host", {}).get("relaxations")):
        problems.append("witnessSha256 is not the digest of the rows and relaxations")
    if bundle.get("assertionCount") != sum(int(row.get("assertions") or 0) for row in rows):
        problems.append("assertionCount is not the rows' sum")
    document = bundle.get("discovery", {}).get("document")
    if document is not None and _sha256(document) != bundle.get("discovery", {}).get("sha256"):
        problems.append("discovery.document does not hash to discovery.sha256")
    signature = bundle.get("signature") or {}
    if signature.get("over") != SIGNATURE_OVER or signature.get("alg") != "ed25519":
        problems.append(f"signature.over must be {SIGNATURE_OVER} with alg ed25519")
    published = {k.get("keyId"): k for k in signing_keys}
    key = published.get(signature.get("keyId"))
    if key is None:
        problems.append(f"signature.keyId {signature.get('keyId')!r} is not among the published signingKeys")
    else:
        try:
            public_key(str(key["publicKey"])).verify(unb64url(str(signature.get("sig", ""))), attestation(bundle))
        except (InvalidSignature, ValueError):
            problems.append("the signature does not verify under the published key")
    certified = [p["id"] for p in bundle.get("claimedProfiles") or [] if p.get("certified")]
    if certified and bundle.get("results", {}).get("totals", {}).get("blocked"):
        problems.append(f"{certified} certified with blocked rows")
    if certified and bundle.get("host", {}).get("relaxations"):
        relaxed = {relaxed_profile(r["obligation"]) for r in bundle["host"]["relaxations"]}
        problems += [f"{p} certified under a relaxation" for p in certified if p in relaxed]
    return problems


#: which profile an obligation's relaxation denies, by the obligation's first segment
RELAXES = {
    "webhooks": "openwop-core-standard",
    "egress": "openwop-core-standard",
    "seams": "openwop-conformance-seams-v2",
}


def relaxed_profile(obligation: str) -> str | None:
    return RELAXES.get(obligation.split(".")[0])
