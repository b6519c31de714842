"""The webhook verifier against deliveries signed here and by hand: each header family alone, both, and tampering."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from tether.egress.signing import TOLERANCE_SECONDS, sign_webhook, verify_webhook

SECRET = "whsec-" + "s" * 40
BODY = b'{"runId":"default/run_0123456789abcdef","event":{"type":"run.completed"}}'
NOW = 1_765_000_000


def by_hand(secret: str, timestamp: int, body: bytes) -> str:
    """The v1 scheme from its definition (not Tether's code): sha256=hex HMAC-SHA256 over "{timestamp}.{body}"."""
    return "sha256=" + hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def family(prefix: str, signature: str, timestamp: int = NOW) -> dict[str, str]:
    return {
        f"{prefix}Webhook-Id": "default/wh_0123456789abcdef",
        f"{prefix}Event-Type": "run.completed",
        f"{prefix}Timestamp": str(timestamp),
        f"{prefix}Signature": signature,
        f"{prefix}Signature-Algorithm": "v1",
    }


@pytest.mark.parametrize("major", [1, 2])
def test_what_the_signer_sends_verifies_at_either_major(major: int) -> None:
    headers = sign_webhook(SECRET, BODY, webhook_id="wh", event_type="run.completed", timestamp=NOW, major=major)
    verdict = verify_webhook(SECRET, headers, BODY, now=NOW)
    assert verdict.accepted and verdict.reason is None
    assert verdict.families == ("OpenWOP-", "X-openwop-")


@pytest.mark.parametrize("prefix", ["X-openwop-", "OpenWOP-", "x-openwop-", "openwop-"])
def test_either_family_alone_is_accepted_whatever_the_case_of_its_names(prefix: str) -> None:
    headers = family(prefix, by_hand(SECRET, NOW, BODY))
    assert verify_webhook(SECRET, headers, BODY, now=NOW).accepted


@pytest.mark.parametrize(
    ("headers", "body", "secret", "now", "reason"),
    [
        (family("X-openwop-", by_hand(SECRET, NOW, BODY)), BODY + b" ", SECRET, NOW, "does not match"),
        (family("X-openwop-", by_hand(SECRET, NOW, BODY)), BODY, SECRET + "x", NOW, "does not match"),
        (
            family("X-openwop-", by_hand(SECRET, NOW, BODY).replace("sha256=", "sha256=0", 1)[:71]),
            BODY,
            SECRET,
            NOW,
            "does not match",
        ),
        (family("X-openwop-", by_hand(SECRET, NOW, BODY)), BODY, SECRET, NOW + TOLERANCE_SECONDS + 1, "stale"),
        (family("OpenWOP-", by_hand(SECRET, NOW, BODY)), BODY, SECRET, NOW - TOLERANCE_SECONDS - 1, "stale"),
        (
            {**family("X-openwop-", by_hand(SECRET, NOW, BODY)), "X-openwop-Signature-Algorithm": "v2"},
            BODY,
            SECRET,
            NOW,
            "not the v1 scheme",
        ),
        ({"X-openwop-Signature": by_hand(SECRET, NOW, BODY)}, BODY, SECRET, NOW, "without X-openwop-Timestamp"),
        (family("X-openwop-", "sha1=abc"), BODY, SECRET, NOW, "sha256=<64 hex digits>"),
        (family("X-openwop-", by_hand(SECRET, NOW, BODY), timestamp=-5), BODY, SECRET, NOW, "Unix seconds"),
        ({"Content-Type": "application/json"}, BODY, SECRET, NOW, "no signature"),
        (family("X-openwop-", by_hand("", NOW, BODY)), BODY, "", NOW, "no secret"),
    ],
)
def test_a_delivery_that_does_not_verify_is_refused_saying_why(
    headers: dict[str, str], body: bytes, secret: str, now: int, reason: str
) -> None:
    verdict = verify_webhook(secret, headers, body, now=now)
    assert not verdict.accepted and not verdict
    assert verdict.reason is not None and reason in verdict.reason, verdict.reason


def test_with_both_families_present_both_must_verify() -> None:
    good = by_hand(SECRET, NOW, BODY)
    tampered = good[:-1] + ("0" if good[-1] != "0" else "1")
    for v2, v1 in ((good, tampered), (tampered, good)):
        headers = {**family("OpenWOP-", v2), **family("X-openwop-", v1)}
        verdict = verify_webhook(SECRET, headers, BODY, now=NOW)
        assert not verdict.accepted and verdict.reason is not None and "does not match" in verdict.reason
