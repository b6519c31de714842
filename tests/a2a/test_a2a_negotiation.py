"""A hand-off's A2A version negotiation on the wire, through the invoke seam, on both stores.

Host A is an in-process Tether host with the seams on; the peer is a scripted one-version
agent on loopback HTTPS (``version_peer.py``). The seam (``POST /conformance/seams/sample/
a2a/invoke``) drives a real hand-off and names the run whose log says what was decided:
a 1.0 peer is accepted; a 0.3-only peer under the default floor is refused with
``400 interop_version_unsupported`` and sent nothing; with ``--a2a-minimum-version 0.3``
the same peer is reached (a downgrade), and the v2 root then has no ``a2a`` record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from backends import Hosts
from harness import wait_until
from inproc import InProcessHost
from schemas import openwop_validator
from version_peer import VersionPeer

from tether.openwop.v2.ids import project

INVOKE = "/conformance/seams/sample/a2a/invoke"
V2 = {"OpenWOP-Version": "2.0"}


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[dict[str, VersionPeer]]:
    made = {version: VersionPeer(tmp_path, version) for version in ("1.0", "0.3")}
    yield made
    for peer in made.values():
        peer.close()


def _host(start_host: Hosts[InProcessHost], peers: dict[str, VersionPeer], *args: str) -> InProcessHost:
    bundle = Path(next(iter(peers.values())).ca_file).parent / "peers-ca.pem"
    bundle.write_bytes(b"".join(Path(p.ca_file).read_bytes() for p in peers.values()))
    egress = ("--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-bundle", str(bundle))
    return start_host.start("--enable-test-seams", *egress, *args)


def _decided(http: httpx.Client, bound: str) -> list[dict[str, Any]]:
    page = http.get(f"/runs/{project(bound)}/events/poll", params={"timeout": 0}, headers=V2)
    assert page.status_code == 200, page.text
    decided = [e for e in page.json()["events"] if e["type"] == "negotiation.decided"]
    for event in decided:
        openwop_validator("v2/run-event").validate(event)
        openwop_validator("v2/run-event-payloads#/$defs/negotiationDecided").validate(event["payload"])
    return decided


def _digest(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()  # the peers' URLs are origins already


def test_the_default_floor_accepts_1_0_and_refuses_a_0_3_only_peer_sending_it_nothing(
    start_host: Hosts[InProcessHost], peers: dict[str, VersionPeer]
) -> None:
    host = _host(start_host, peers)
    http = host.http(host.dev_key)
    accepted = http.post(INVOKE, json={"peerUrl": peers["1.0"].url, "authenticated": True})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["negotiatedVersion"] == "1.0"
    [decided] = _decided(http, accepted.json()["runId"])
    assert decided["payload"]["outcome"] == "accepted" and decided["payload"]["version"] == "1.0"
    assert decided["payload"]["peerDigest"] == _digest(peers["1.0"].url)
    assert {h["a2a-version"] for h in peers["1.0"].posts()} == {"1.0"}

    refused = http.post(INVOKE, json={"peerUrl": peers["0.3"].url, "authenticated": False, "peerOffersOnly": "0.3"})
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["error"] == "interop_version_unsupported" and "--a2a-minimum-version 0.3" in body["message"]
    assert body["details"]["protocol"] == "a2a"
    [decided] = _decided(http, body["details"]["runId"])
    assert decided["payload"]["outcome"] == "refused" and decided["payload"]["reason"] == "below-floor"
    assert decided["payload"]["floor"] == "1.0" and "version" not in decided["payload"]
    assert peers["0.3"].posts() == [], "nothing is sent to a peer below the floor"
    run_id = body["details"]["runId"].partition("/")[2]
    run = wait_until(lambda: (r := http.get(f"/v1/runs/{run_id}").json())["status"] == "failed" and r, what="failed")
    assert run["error"]["code"] == "interop_version_unsupported"
    snapshot = http.get(f"/runs/{project(body['details']['runId'])}", headers=V2)
    openwop_validator("v2/run-snapshot").validate(snapshot.json())

    with host.client() as anonymous:
        root = anonymous.get("/.well-known/openwop", headers=V2).json()
    assert root["a2a"]["minimumVersion"] == "1.0"


def test_the_legacy_floor_reaches_a_0_3_peer_and_takes_a2a_off_the_v2_root(
    start_host: Hosts[InProcessHost], peers: dict[str, VersionPeer]
) -> None:
    host = _host(start_host, peers, "--a2a-minimum-version", "0.3")
    http = host.http(host.dev_key)
    reached = http.post(INVOKE, json={"peerUrl": peers["0.3"].url})
    assert reached.status_code == 200, reached.text
    assert reached.json()["negotiatedVersion"] == "0.3"
    [decided] = _decided(http, reached.json()["runId"])
    assert decided["payload"]["outcome"] == "accepted" and decided["payload"]["version"] == "0.3"
    assert decided["payload"]["floor"] == "0.3"
    assert {h["a2a-version"] for h in peers["0.3"].posts()} == {"0.3"}
    v1_log = http.get(f"/v1/runs/{reached.json()['runId'].partition('/')[2]}/events/poll", params={"timeout": 0})
    [line] = [e for e in v1_log.json()["events"] if e["payload"].get("kind") == "a2a.handoff.negotiated"]
    assert line["type"] == "log.appended" and line["payload"]["downgraded"] is True

    with host.client() as anonymous:
        root = anonymous.get("/.well-known/openwop", headers=V2).json()
        v1_root = anonymous.get("/.well-known/openwop").json()
    openwop_validator("v2/capabilities").validate(root)
    assert "a2a" not in root, "0.3 is below the v2 record's floor: no a2a record at all"
    assert "0.3" in v1_root["a2a"]["protocolVersions"], "the v1 document is as it was"


def test_the_seam_needs_the_callers_key_and_a_peer_url(
    start_host: Hosts[InProcessHost], peers: dict[str, VersionPeer]
) -> None:
    host = _host(start_host, peers)
    with host.client() as anonymous:
        assert anonymous.post(INVOKE, json={"peerUrl": peers["1.0"].url}).status_code == 401
    http = host.http(host.dev_key)
    url = peers["1.0"].url
    for body in (
        {},
        {"peerUrl": "x"},
        {"peerUrl": url, "authenticated": "yes"},
        {"peerUrl": url, "requestVersion": "9"},
    ):
        answer = http.post(INVOKE, json=body)
        assert answer.status_code == 400 and answer.json()["error"] == "validation_error", answer.text
    assert peers["1.0"].requests == [], "a refused request reaches no peer"


def test_a_peer_refusing_the_requested_version_reads_as_interop_version_unsupported_in_either_shape(
    start_host: Hosts[InProcessHost], peers: dict[str, VersionPeer]
) -> None:
    host = _host(start_host, peers)
    http = host.http(host.dev_key)
    peer = peers["1.0"]
    for legacy in (False, True):
        peer.legacy_error_data = legacy
        answer = http.post(INVOKE, json={"peerUrl": peer.url, "authenticated": True, "requestVersion": "99.0"})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "interop_version_unsupported", answer.text
    assert [h["a2a-version"] for h in peer.posts()] == ["99.0", "99.0"], "the host asked the peer for it"
    taken = http.post(INVOKE, json={"peerUrl": peer.url, "requestVersion": "1.0"})
    assert taken.status_code == 200 and taken.json() == {"negotiatedVersion": "1.0"}, taken.text
    below = http.post(INVOKE, json={"peerUrl": peers["0.3"].url, "requestVersion": "0.3"})
    assert below.status_code == 400 and below.json()["error"] == "interop_version_unsupported", below.text
    assert peers["0.3"].posts() == [], "below the floor nothing is sent, whatever is asked for"
