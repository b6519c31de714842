"""``tether certify`` and the signing keys: the bundle against the official schema, its signature against the key
the host publishes, every non-pass row with its reason, the relaxation it ran under, and key rotation.

The bundle's digests are recomputed here from the v2 conformance text (not by calling the
code under test), and its signature is checked with ``cryptography`` directly.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import rfc8785
import trustme
from backends import Hosts
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from inproc import InProcessHost, create_key, run_cli
from schemas import fixtures_v2_dir, group_dirs, openwop_validator

from tether.certify import CHECKS, verify
from tether.certify.bundle import canonical

V2 = {"OpenWOP-Version": "2.0", "Accept": "application/json"}


def v2_root(url: str) -> dict[str, Any]:
    doc: dict[str, Any] = httpx.get(f"{url}/.well-known/openwop", headers=V2).json()
    return doc


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def attested(bundle: dict[str, Any]) -> bytes:
    """The four members the signature covers, as RFC 8785 bytes."""
    return rfc8785.dumps(
        {
            "witnessSha256": bundle["witnessSha256"],
            "host.build": bundle["host"]["build"],
            "suite.version": bundle["suite"]["version"],
            "discovery.sha256": bundle["discovery"]["sha256"],
        }
    )


def signature_holds(bundle: dict[str, Any], published: dict[str, Any]) -> bool:
    key = Ed25519PublicKey.from_public_bytes(unb64url(published["publicKey"]))
    try:
        key.verify(unb64url(bundle["signature"]["sig"]), attested(bundle))
    except InvalidSignature:
        return False
    return True


def test_canonical_json_is_rfc8785() -> None:
    """RFC 8785 §3.2.2's example: sorted members, ES6 numbers, minimal string escapes."""
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}'
    )
    wanted = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical(json.loads(source)) == wanted.encode()


@pytest.fixture(scope="module")
def certified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessHost, dict[str, Any], str]]:
    """A host as an operator rigs it for the suite, but with certify's webhook receiver on loopback (TLS, a test
    CA) that the host reaches only because its egress guard admits loopback (the relaxation), and the bundle
    ``tether certify`` wrote for it."""
    folder = tmp_path_factory.mktemp("certify")
    ca = trustme.CA()
    ca_file, cert_file = folder / "ca.pem", folder / "receiver.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    rig = ("--seed-fixtures", str(fixtures_v2_dir()), "--egress-allow-cidr", "127.0.0.1/32", "--enable-test-seams")
    host = InProcessHost(folder / "host", *rig, "--egress-ca-bundle", str(ca_file))
    with host:
        key = create_key(host.data_dir, "suite")
        tenant_b = create_key(host.data_dir, "suite-b", "--tenant", "b")
        out = folder / "bundle.json"
        done = run_cli(
            *("certify", "--url", host.url, "--key", key, "--tenant-b-key", tenant_b, "--out", str(out)),
            *("--schemas", str(group_dirs()["schemas-v2"]), "--build-kind", "commit", "--build-id", "0123abcd"),
            *("--receiver-listen", "127.0.0.1:0", "--receiver-certfile", str(cert_file)),
            data_dir=host.data_dir,
            check=False,
        )
        assert done.returncode == 1, f"not every profile can certify yet:\n{done.stdout}\n{done.stderr}"
        yield host, json.loads(out.read_text()), done.stdout


def test_every_non_pass_row_is_listed_and_printed_with_its_reason(
    certified: tuple[InProcessHost, dict[str, Any], str], tmp_path: Path
) -> None:
    """Every file but one skipped: each skipped row has its reason in the row, in ``detail.nonPass`` and on
    the terminal, and a profile with a non-pass floor row is not certified."""
    host, _, _ = certified
    ran = "v2-capabilities-root-closed"
    skipped = [c.scenario for c in CHECKS if c.scenario != ran]
    out = tmp_path / "bundle.json"
    key = create_key(host.data_dir, "suite-skips")
    done = run_cli(
        *("certify", "--url", host.url, "--key", key, "--out", str(out)),
        *("--schemas", str(group_dirs()["schemas-v2"])),
        *(arg for scenario in skipped for arg in ("--skip", scenario)),
        data_dir=host.data_dir,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    bundle = json.loads(out.read_text())
    rows = {r["id"]: r for r in bundle["results"]["requirements"]}
    non_pass = [r for r in rows.values() if r["result"] != "executed-pass"]
    assert len(non_pass) == 20 and {r["result"] for r in non_pass} == {"skipped"}
    listed = {n["id"]: n for n in bundle["detail"]["nonPass"]}
    assert sorted(listed) == sorted(r["id"] for r in non_pass)
    for row in non_pass:
        assert row["detail"].strip() and listed[row["id"]]["reason"] == row["detail"], row
        assert row["id"] in done.stdout, "the command prints every non-pass row"
    assert rows[f"openwop.floor.{ran}"]["result"] == "executed-pass"
    assert not any(p["certified"] for p in bundle["claimedProfiles"]), bundle["claimedProfiles"]


def test_the_bundle_is_the_official_shape_but_for_naming_its_own_suite(
    certified: tuple[InProcessHost, dict[str, Any], str],
) -> None:
    _, bundle, _ = certified
    errors = sorted(openwop_validator("v2/certification-bundle").iter_errors(bundle), key=lambda e: list(e.path))
    assert [(list(e.absolute_path), e.validator) for e in errors] == [(["suite", "name"], "const")], [
        e.message for e in errors
    ]
    assert bundle["suite"]["name"] == "tether-certify", "Tether's own check must not pass for the official suite"
    assert {p["evidenceTier"] for p in bundle["claimedProfiles"]} == {"self"}
    assert bundle["host"]["build"] == {"kind": "commit", "id": "0123abcd"}


def test_the_signature_verifies_with_the_published_key_and_not_after_one_byte_changes(
    certified: tuple[InProcessHost, dict[str, Any], str],
) -> None:
    host, bundle, _ = certified
    doc = v2_root(host.url)
    openwop_validator("v2/capabilities").validate(doc)
    published = {k["keyId"]: k for k in doc["signingKeys"]}
    signature = bundle["signature"]
    assert signature["over"] == ["witnessSha256", "host.build", "suite.version", "discovery.sha256"]
    assert signature["keyId"] in published and bundle["host"]["signingKeyId"] == signature["keyId"]
    assert signature_holds(bundle, published[signature["keyId"]])
    assert verify(bundle, doc["signingKeys"]) == []

    for field in ("witnessSha256", "discovery.sha256", "suite.version", "host.build.id"):
        tampered = copy.deepcopy(bundle)
        *path, last = field.split(".")
        holder = tampered
        for part in path:
            holder = holder[part]
        value = holder[last]
        holder[last] = value[:-1] + ("0" if value[-1] != "0" else "1")  # one byte
        assert not signature_holds(tampered, published[signature["keyId"]]), field
        assert verify(tampered, doc["signingKeys"]), f"a bundle with {field} changed must not verify"
    forged = copy.deepcopy(bundle)
    sig = forged["signature"]["sig"]
    forged["signature"]["sig"] = ("B" if sig[0] == "A" else "A") + sig[1:]
    assert not signature_holds(forged, published[signature["keyId"]])
    assert verify(bundle, []) == [f"signature.keyId {signature['keyId']!r} is not among the published signingKeys"]


Certified = tuple[InProcessHost, dict[str, Any], str]


def test_the_digests_are_those_the_conformance_text_defines(certified: Certified) -> None:
    host, bundle, _ = certified
    rows = sorted(bundle["results"]["requirements"], key=lambda r: r["id"])
    preimage: Any = [{k: r[k] for k in ("id", "scenario", "result", "assertions", "detail") if k in r} for r in rows]
    relaxations = bundle["host"].get("relaxations") or []
    if relaxations:
        preimage = {"rows": preimage, "relaxations": relaxations}
    assert bundle["witnessSha256"] == hashlib.sha256(rfc8785.dumps(preimage)).hexdigest()
    captured = bundle["discovery"]["document"]
    assert bundle["discovery"]["sha256"] == hashlib.sha256(rfc8785.dumps(captured)).hexdigest()
    assert {k: v for k, v in captured.items() if k != "signingKeys"} == {
        k: v for k, v in v2_root(host.url).items() if k != "signingKeys"
    }
    assert bundle["assertionCount"] == sum(r.get("assertions", 0) for r in rows) > 0


def test_every_floor_file_passes_and_only_the_relaxation_is_held_against_a_profile(
    certified: tuple[InProcessHost, dict[str, Any], str],
) -> None:
    _, bundle, printed = certified
    rows = {r["id"]: r for r in bundle["results"]["requirements"]}
    assert len(rows) == 21, "one row per floor file: 3 + 14 + 4"
    non_pass = [r for r in rows.values() if r["result"] != "executed-pass"]
    totals = bundle["results"]["totals"]
    assert totals == {"executedPass": 21, "executedFail": 0, "skipped": 0, "inapplicable": 0, "blocked": 0}, non_pass
    assert not non_pass and "nonPass" not in bundle.get("detail", {}), "nothing to list when every row passed"
    assert bundle["assertionCount"] >= 21 and all(r["assertions"] >= 1 for r in rows.values())

    # the loopback receiver the rig allows is stated, and denies the profile it concerns (and only that one)
    assert [r["obligation"] for r in bundle["host"]["relaxations"]] == ["webhooks.egress-guard"]
    assert "--egress-allow-cidr" in bundle["host"]["relaxations"][0]["reason"]
    assert "relaxation webhooks.egress-guard" in printed
    verdicts = {p["id"]: p for p in bundle["claimedProfiles"]}
    assert verdicts["openwop-core-standard"]["certified"] is False, "a relaxed egress guard never certifies"
    for profile, witnesses in (("openwop-discovery-core", 3), ("openwop-conformance-seams-v2", 4)):
        assert verdicts[profile] == {
            "id": profile,
            "evidenceTier": "self",
            "witnessCount": witnesses,
            "certified": True,
        }
    assert len([c for c in CHECKS if c.profile == "openwop-core-standard"]) == 14
    assert "replay" in bundle["discovery"]["document"] and "conformance" in bundle["discovery"]["document"]


def test_a_rotated_key_stays_published_as_retired(start_host: Hosts[InProcessHost], tmp_path: Path) -> None:
    """The key is made at first start, kept across a restart, and a rotation publishes a new one beside the old,
    which carries ``retiredAt``; every host of the store publishes the same list."""
    host = start_host()
    first = v2_root(host.url)["signingKeys"]
    assert [sorted(k) for k in first] == [["alg", "keyId", "publicKey", "use"]]
    assert len(unb64url(first[0]["publicKey"])) == 32 and len(first[0]["publicKey"]) == 43
    host.restart()
    assert v2_root(host.url)["signingKeys"] == first, "made once per store"

    stranger = tmp_path / "other.key"
    stranger.write_bytes(b"k" * 32)
    refused = run_cli(
        "certify", "keys", "rotate", "--secret-key-file", str(stranger), data_dir=host.data_dir, check=False
    )
    assert refused.returncode == 1 and "does not open with this host key" in refused.stderr, refused
    assert v2_root(host.url)["signingKeys"] == first, "a refused rotation changes nothing"

    rotated = run_cli("certify", "keys", "rotate", data_dir=host.data_dir)
    assert first[0]["keyId"] in rotated.stdout
    doc = v2_root(host.url)
    openwop_validator("v2/capabilities").validate(doc)
    keys = doc["signingKeys"]
    assert [k["keyId"] for k in keys][0] == first[0]["keyId"] and len(keys) == 2
    assert keys[0]["publicKey"] == first[0]["publicKey"] and "retiredAt" in keys[0]
    assert "retiredAt" not in keys[1] and keys[1]["keyId"] != keys[0]["keyId"]
    listed = json.loads(run_cli("certify", "keys", "list", "--json", data_dir=host.data_dir).stdout)
    assert listed == keys
    if host.database_url is not None:  # PostgreSQL: another host of the same database publishes the same keys
        shared_key = str(host.data_dir / "host.key")
        other = start_host("--secret-key-file", shared_key, name="other", database_url=host.database_url)
        assert v2_root(other.url)["signingKeys"] == keys
