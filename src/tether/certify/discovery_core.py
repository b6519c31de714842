"""``openwop-discovery-core``'s three floor files: the closed root, the preferred version, the version header."""

from __future__ import annotations

import copy

from tether.certify._driver import VERSION, code_of, major
from tether.certify.ledger import Check, Leg

PROFILE = "openwop-discovery-core"

#: shapes the closed root must refuse: an unknown root key, a dotted mirror, the v1 wrapper, a root profiles[]
FORBIDDEN: tuple[dict[str, object], ...] = (
    {"openwopConformanceUnknownRootKey": {"status": "stable", "since": "2.0", "witness": "claims-check"}},
    {"host.replay": {"status": "stable", "since": "2.0", "witness": "claims-check"}},
    {"capabilities": {}},
    {"profiles": ["openwop-discovery-core"]},
)


def capabilities_root_closed(leg: Leg) -> None:
    """The v2 root validates ``capabilities.schema.json``; each forbidden shape injected into it does not."""
    doc = leg.session.discovery()
    leg.valid("v2/capabilities", doc, "the v2 root")
    for injected in FORBIDDEN:
        leg.invalid("v2/capabilities", {**copy.deepcopy(doc), **injected}, f"the root with {next(iter(injected))}")


def preferred_version_default(leg: Leg) -> None:
    """``preferredVersion`` is listed and 1.x while a 1.x is; header-less discovery is the preferred major; a
    header-less unversioned path answers major 2."""
    doc = leg.session.discovery()
    preferred = doc.get("preferredVersion")
    listed = doc.get("protocolVersions") or []
    leg.expect(isinstance(preferred, str) and VERSION.fullmatch(preferred), "preferredVersion is a major.minor")
    leg.expect(preferred in listed, "preferredVersion is a member of protocolVersions")
    if len(listed) == 1:
        leg.equal(doc.get("protocolVersion", preferred), preferred, "a lone major's protocolVersion")
    with leg.session.client(driver=False) as raw:
        bare = raw.get("/.well-known/openwop", headers={"Accept": "application/json"})
        leg.equal(bare.status_code, 200, "header-less discovery")
        leg.equal(major(bare), str(preferred).split(".")[0], "header-less discovery answers in the preferred major")
        body = bare.json()
        if str(preferred).startswith("2."):
            leg.valid("v2/capabilities", body, "the header-less document")
        else:
            leg.expect(isinstance(body.get("protocolVersion"), str), "the v1 document names its protocolVersion")
            leg.expect(isinstance(body.get("protocolVersions"), list), "the v1 document lists protocolVersions")
            leg.expect(isinstance(body.get("preferredVersion"), str), "the v1 document names preferredVersion")
        probe = raw.get(
            "/runs/openwop-conformance~2F" + "h" * 22,
            headers={"Accept": "application/json", "Authorization": f"Bearer {leg.session.key}"},
        )
        leg.equal(major(probe), "2", "a header-less unversioned path answers major 2")
    if not any(v.startswith("1.") for v in listed):
        leg.inapplicable("leg 4 needs a 1.x listed")
    leg.expect(str(preferred).startswith("1."), "a host listing a 1.x prefers it through the overlap")


def version_header_honored(leg: Leg) -> None:
    """``OpenWOP-Version: 2.0`` on discovery is honoured (another body, major 2), never ignored."""
    headers = {"Accept": "application/json", "Authorization": f"Bearer {leg.session.key}"}
    with leg.session.client(driver=False) as raw:
        bare = raw.get("/.well-known/openwop", headers=headers)
        asked = raw.get("/.well-known/openwop", headers={**headers, "OpenWOP-Version": "2.0"})
        if bare.status_code != 200:
            leg.blocked(f"header-less discovery answered {bare.status_code}")
        listed = bare.json().get("protocolVersions") or []
        if not any(v.startswith("1.") for v in listed):
            one = raw.get("/.well-known/openwop", headers={**headers, "OpenWOP-Version": "1"})
            leg.equal((one.status_code, code_of(one)), (406, "protocol_version_unsupported"), "major 1 unlisted")
            named = sorted((one.json().get("details") or {}).get("protocolVersions") or [])
            leg.equal(named, sorted(listed), "the 406 names the listed versions")
    leg.equal(asked.status_code, 200, "discovery asked for 2.0")
    leg.expect(asked.content != bare.content, "the 2.0 document differs from the header-less one")
    majors = {v.split(".")[0] for v in listed}
    if not {"1", "2"} <= majors:
        leg.inapplicable("leg 2 needs both majors listed")
    leg.equal(major(asked), "2", "the 2.0 answer names major 2")


CHECKS = (
    Check("v2-capabilities-root-closed", PROFILE, capabilities_root_closed),
    Check("v2-preferred-version-default", PROFILE, preferred_version_default),
    Check("v2-version-header-honored", PROFILE, version_header_honored),
)
