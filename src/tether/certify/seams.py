"""``openwop-conformance-seams-v2``'s four floor files, each gated on the seams profile and on its family.

The profile's predicate is the root's ``conformance`` metadata; each file also needs its
family (fork and no-refire: ``replay``; business key: ``idempotency``; the signed webhook:
``webhooks``). A host that advertises neither gets ``inapplicable`` rows that say so. Where
the host advertises both, the legs drive the seams under ``/conformance/seams/``; the
checks for those legs are not written yet, and say so as ``blocked`` (a checker-side gap,
which keeps the bundle from certifying anything, as it must).
"""

from __future__ import annotations

from tether.certify.ledger import Check, Leg

PROFILE = "openwop-conformance-seams-v2"
SEAMS_PROFILE = "openwop-conformance-seams-v2"


def _gated(leg: Leg, family: str) -> None:
    doc = leg.session.discovery()
    conformance = doc.get("conformance")
    if not isinstance(conformance, dict) or conformance.get("seamsProfile") != SEAMS_PROFILE:
        leg.inapplicable(f"the root does not advertise conformance.seamsProfile {SEAMS_PROFILE!r}: no v2 seams mounted")
    if not isinstance(doc.get(family), dict):
        leg.inapplicable(f"the {family} family is not advertised, and this file exercises it")


def _not_written(scenario: str, family: str, what: str) -> Check:
    def check(leg: Leg) -> None:
        _gated(leg, family)
        leg.blocked(f"certify does not drive this file's seams yet ({what})")

    check.__doc__ = what
    return Check(scenario, PROFILE, check)


CHECKS = (
    _not_written(
        "v2-fork-a-v1-run",
        "replay",
        "a seeded era-2 run forks; the fork's prefix equals the translated parent; both run.started carry the "
        "legacy issuer",
    ),
    _not_written(
        "v2-effect-identity-business-key",
        "idempotency",
        "one providerKey and one keying across two transport attempts, one Idempotency-Key on the wire",
    ),
    _not_written(
        "v2-v1-signed-webhook-accepted",
        "webhooks",
        "an X-openwop-*-only delivery is accepted by the receive seam and a tampered one refused",
    ),
    _not_written(
        "v2-effect-seam-no-refire",
        "replay",
        "a replay fork of a fired seam adds no ledger attempt",
    ),
)
