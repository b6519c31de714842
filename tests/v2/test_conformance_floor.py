"""Our replica of the official OpenWOP v2 conformance suite's floor, and of the v2 files beside it, against a real host.

The suite (``conformance/src/scenarios/*.test.ts`` of openwop/openwop, run with
``OPENWOP_TARGET_MAJOR=2``) cannot run here: its npm package is not on the registry. So
each test below is one scenario file, named after it, making the requests the file makes
and every assertion it makes, with the official v2 schemas (the pinned oracle) as the
validators. The floor files are ``tether certify``'s own checks (``src/tether/certify/``),
run here against this rig and held to ``executed-pass``, so a certification bundle and this
test always mean the same thing by a file; the files beside the floor are tests here.
Issue 25 is done when ``openwop-discovery-core`` certifies (3/3 floor files) and the
``openwop-core-standard`` floor files other than ``v2-effect-seam-manifest`` pass with 0
fail and 0 blocked; so where the suite would record a leg ``blocked`` (it denies
certification) this replica fails, and where it would record a floor leg ``inapplicable``
because Tether lacks what the leg needs, it fails too.

The rig is the suite's operator's: a host started with ``--seed-fixtures`` on the v2
suite's five fixtures, so discovery lists them; the suite's driver (``Accept:
application/json``, ``OpenWOP-Version: 2.0``, the Bearer key, ids in paths written with
``encodeURIComponent`` or the ``~2F`` projection); a second tenant's key
(``OPENWOP_TEST_TENANT_B_API_KEY``); and a webhook receiver. The suite's receiver sits
behind a public https tunnel (``OPENWOP_WEBHOOK_RECEIVER_URL``) with the host's egress guard
fully on; here it is a real TLS receiver on loopback that the host may reach only because it
runs with ``--egress-allow-cidr 127.0.0.1/32`` (and the receiver's CA): a relaxation of the
test rig, not of what the scenarios assert.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import trustme
from backends import suite_host
from harness import Host, wait_until
from keys import made_key
from receiver import Received, Receiver, egress_to
from schemas import fixtures_v2_dir, group_dirs, openwop_validator

from tether.certify._driver import Stream, code_of, created, major, poll, settled
from tether.certify._driver import subscribe as certify_subscribe
from tether.certify.ledger import run_check
from tether.certify.runner import CHECKS
from tether.certify.session import Attempt as CertifyAttempt
from tether.certify.session import Session

NOOP = "conformance-noop"
DELAY = "conformance-delay"
FAILURE = "conformance-failure"
FOREIGN_RUN_ID = "openwop-conformance-foreign-tenant/foreignopaque0123456789abcdef"
VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
BOUND_ID = re.compile(r"^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$")
STREAM_MODES = ("values", "updates", "messages", "debug")

#: ``spec/v2/errors.json`` (registry 2.0, updated 2026-10-06, the rows openwop-client 2.7.0 vendors): status -> codes
_REGISTRY_BY_STATUS = {
    400: "connection_provider_unresolved connector_action_unresolved credential_scope_unsupported "
    "delegation_chain_cyclic delegation_chain_too_long idempotency_key_invalid interop_version_unsupported "
    "oauth_provider_unsupported oauth_scope_unsupported pack_dependency_cycle pack_engine_unsupported "
    "pack_integrity_failure pack_kind_invalid pack_lockfile_incomplete pack_peer_dependency_missing "
    "pack_peer_dependency_undefined pack_signature_invalid pack_validation_failed protocol_version_mismatch "
    "schedule_horizon_exceeded sub_chain_cycle sub_chain_depth_exceeded unsupported_runtime "
    "unsupported_stream_mode until_in_past validation_error webhook_endpoint_unverified webhook_url_rejected",
    401: "audience_mismatch connector_auth_declined connector_auth_expired credential_lifetime_exceeded "
    "credential_revoked delegation_expired identity_unresolvable identity_unverified interrupt_token_invalid "
    "key_revoked sender_constraint_missing unauthenticated",
    403: "credential_forbidden credential_scope_forbidden delegation_scope_amplified egress_denied forbidden "
    "force_engine_version_forbidden id_tenant_mismatch mock_provider_forbidden pack_namespace_unauthorized "
    "run_forbidden sandbox_capability_denied sandbox_escape_attempt workspace_membership_required",
    404: "credential_not_found interrupt_not_found not_found pack_version_not_found replay_source_missing "
    "signature_not_available",
    406: "protocol_version_unsupported",
    409: "connection_provider_conflict envelope_correlation_conflict host_event_resync_required "
    "idempotency_in_flight idempotency_key_mismatch interrupt_already_resolved pack_dependency_conflict "
    "pack_integrity_mismatch proposal_install_conflict proposal_stale proposal_state_conflict "
    "replay_context_summary_unavailable replay_diverged_at_refusal replay_memory_snapshot_unavailable "
    "run_already_active run_state_conflict run_terminal version_conflict workspace_conflict",
    410: "interrupt_cancelled interrupt_expired run_expired",
    413: "payload_too_large workspace_too_large",
    415: "unsupported_media_type",
    422: "approval_rejected budget_exhausted budget_model_denied capability_not_provided capability_required "
    "connection_auth_metadata_mismatch conversation_roster_exceeded conversation_speaker_not_participant "
    "credential_required envelope_invalid envelope_refusal envelope_truncation_unrecoverable eval_gate_unmet "
    "fork_point_invalid loop_limit_exceeded mcp_mrtr_rounds_exceeded node_config_invalid "
    "pack_runtime_requirement_unmet provider_policy_denied recursion_limit_exceeded residency_unavailable "
    "run_timeout sandbox_invocation_error sandbox_memory_exceeded sandbox_timeout storage_limit_exceeded "
    "token_budget_exceeded unknown_envelope_kind unknown_schema_version",
    426: "client_version_unsupported",
    429: "rate_limited",
    500: "event_type_unmapped internal_error pack_load_failure payload_unprojectable",
    501: "credential_unavailable",
    502: "mcp_error upstream_unavailable",
    503: "pack_registry_unreachable runner_unavailable service_unavailable",
}
REGISTERED_STATUS = {code: status for status, codes in _REGISTRY_BY_STATUS.items() for code in codes.split()}
#: ``errors.json`` ``vendorCodePattern``; its org must be registered in ``declaration.json`` ``extensions``
VENDOR_CODE = re.compile(r"^(?!openwop\.)[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*$")
#: the parameterless GETs of ``spec/v2/path-manifest.json`` (openwop 02c7b491), discovery aside
MANIFEST_PARAMETERLESS_GETS = (
    "/agents",
    "/agents/org-chart",
    "/agents/roster",
    "/audit/verify",
    "/content/pages",
    "/content/settings",
    "/host/effect-seams",
    "/host/events",
    "/openapi.json",
    "/prompts",
    "/runs",
    "/tools",
)


def enc(value: str) -> str:
    """JavaScript's ``encodeURIComponent``: what the suite writes most ids in paths with (``/`` as ``%2F``)."""
    return quote(value, safe="-_.!~*'()")


def project(bound: str) -> str:
    """The suite's ``projectBoundId``: UTF-8 bytes outside ``[A-Za-z0-9._-]`` as ``~`` and two uppercase hex digits."""
    kept = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    return "".join(chr(b) if b in kept else f"~{b:02X}" for b in bound.encode())


def bare(value: str) -> str:
    """The part of an id after its tenant (the suite's ``bareId``)."""
    return value.partition("/")[2] if "/" in value else value


def envelope(response: httpx.Response) -> dict[str, Any]:
    """The body of a refusal, held to the official v2 error envelope."""
    body: dict[str, Any] = response.json()
    openwop_validator("v2/error-envelope").validate(body)
    return body


# the rig -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt the suite's receiver saw, keyed as it keys them: ``(webhookId, runId, sequence)``."""

    key: str
    run_id: str | None
    webhook_id: str
    sequence: int | None
    status: int
    at: float


class ScopedReceivers:
    """The suite's scoped receivers on one TLS listener: each exercise a nonce path of its own that answers 500
    to the first ``fail_first`` attempts for each delivery key and 204 after (``math.inf``: never succeeds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fail_first: dict[str, float] = {}
        self._seen: dict[tuple[str, str], int] = {}
        self._attempts: dict[str, list[Attempt]] = {}

    def exercise(self, fail_first: float) -> str:
        path = f"/rx/{uuid.uuid4().hex}"
        with self._lock:
            self._fail_first[path] = fail_first
            self._attempts[path] = []
        return path

    def close(self, path: str) -> None:
        """Drop the nonce: later deliveries to it are answered 404, as the suite's front-mux answers them."""
        with self._lock:
            self._fail_first.pop(path, None)

    def attempts(self, path: str) -> list[Attempt]:
        with self._lock:
            return list(self._attempts.get(path, []))

    def __call__(self, received: Received) -> tuple[int, dict[str, str]]:
        run_id: str | None = None
        sequence: Any = None
        try:
            parsed = json.loads(received.body)
            run_id = parsed.get("runId") if isinstance(parsed.get("runId"), str) else None
            sequence = (parsed.get("event") or {}).get("sequence")
        except (ValueError, AttributeError):
            pass  # not JSON: still an attempt
        webhook_id = received.headers.get("openwop-webhook-id") or received.headers.get("x-openwop-webhook-id") or ""
        key = f"{webhook_id}|{run_id or ''}|{sequence}"
        with self._lock:
            fail_first = self._fail_first.get(received.path)
            if fail_first is None:
                return 404, {}
            n = self._seen[(received.path, key)] = self._seen.get((received.path, key), 0) + 1
            status = 500 if n <= fail_first else 204
            self._attempts[received.path].append(
                Attempt(
                    key,
                    run_id,
                    webhook_id,
                    sequence if isinstance(sequence, int) else None,
                    status,
                    time.monotonic(),
                )
            )
        return status, {}


@pytest.fixture(scope="module")
def receivers() -> ScopedReceivers:
    return ScopedReceivers()


@pytest.fixture(scope="module")
def rx(tmp_path_factory: pytest.TempPathFactory, receivers: ScopedReceivers) -> Iterator[Receiver]:
    receiver = Receiver(trustme.CA(), tmp_path_factory.mktemp("suite-receiver"))
    receiver.script = receivers
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str, rx: Receiver) -> Host:
    """The operator's host: the v2 suite's fixtures seeded; the loopback receiver reachable (the rig's relaxation)."""
    return suite_host(request, "--seed-fixtures", str(fixtures_v2_dir()), *egress_to(rx))


@pytest.fixture
def drv(host: Host, key: str) -> Iterator[httpx.Client]:
    """The suite's ``driver``: JSON, major 2, the Bearer key."""
    with host.client(key) as client:
        client.headers.update({"Accept": "application/json", "OpenWOP-Version": "2.0"})
        yield client


@pytest.fixture
def anon(host: Host) -> Iterator[httpx.Client]:
    """The suite's driver with ``authenticated: false``."""
    with host.client() as client:
        client.headers.update({"Accept": "application/json", "OpenWOP-Version": "2.0"})
        yield client


@pytest.fixture
def raw(host: Host) -> Iterator[httpx.Client]:
    """The suite's raw ``fetch``: only the headers a leg sets (httpx's own aside)."""
    with host.client() as client:
        yield client


@pytest.fixture
def tenant_b_key(host: Host) -> str:
    """``OPENWOP_TEST_TENANT_B_API_KEY``: a key of a second tenant."""
    return made_key(host, "b", "--tenant", "b")


def discovery(anon: httpx.Client) -> dict[str, Any]:
    """``v2Discovery()``: the unauthenticated v2 root; the suite records nearly every leg blocked without it."""
    answer = anon.get("/.well-known/openwop")
    assert answer.status_code == 200, f"blocked: v2 discovery answered {answer.status_code} {answer.text}"
    doc: dict[str, Any] = answer.json()
    assert isinstance(doc, dict)
    return doc


def noop_settled(drv: httpx.Client, **body: Any) -> str:
    run_id = created(drv, {"workflowId": NOOP, **body})
    settled(drv, run_id)
    return run_id


def check_event(event: dict[str, Any]) -> None:
    openwop_validator("v2/run-event").validate(event)


def subscribe(host: Host, key: str, path: str, *, timeout: float = 8.0, last_event_id: str | None = None) -> Stream:
    """lib/sse.ts ``subscribe``: a raw SSE GET read until the server closes it or ``timeout`` passes, as certify reads
    one (a frame counts when it has a ``data:`` line, comments are skipped)."""
    return certify_subscribe(Session(host.url, key), key, path, timeout=timeout, last_event_id=last_event_id)


# the floor: driven through tether certify's checks ------------------------------------------------
#
# Each floor file below is the check ``tether certify`` runs for it (``src/tether/certify/``), held here to
# ``executed-pass``: the check makes the file's requests and assertions, with the oracle's schemas and this
# module's receiver, so the test and the certification bundle can never disagree on what a file asserts.


class OracleSchemas:
    """The pinned official schemas, as certify's checks ask for them."""

    def errors(self, name: str, document: Any) -> list[str]:
        return [error.message for error in openwop_validator(name).iter_errors(document)]

    def event_types(self) -> set[str]:
        return _event_types()


class SuiteReceiver:
    """This module's scoped receivers, as certify's webhook check drives a receiver."""

    def __init__(self, rx: Receiver, receivers: ScopedReceivers) -> None:
        self.rx, self.receivers = rx, receivers

    def exercise(self, fail_first: float) -> str:
        return self.receivers.exercise(fail_first)

    def url(self, path: str) -> str:
        return self.rx.url(path)

    def close(self, path: str) -> None:
        self.receivers.close(path)

    def attempts(self, path: str) -> list[CertifyAttempt]:
        return [
            CertifyAttempt(a.run_id, a.webhook_id, a.sequence, a.status, a.at) for a in self.receivers.attempts(path)
        ]


@pytest.fixture
def session(host: Host, key: str, tenant_b_key: str, rx: Receiver, receivers: ScopedReceivers) -> Session:
    """The rig of ``tether certify``: this host, both tenants' keys, the oracle, the receiver."""
    return Session(
        host.url, key, tenant_b_key=tenant_b_key, schemas=OracleSchemas(), receiver=SuiteReceiver(rx, receivers)
    )


def witnessed(scenario: str, session: Session) -> None:
    """Run certify's check of floor file ``scenario``; anything but ``executed-pass`` fails, with its reason."""
    check = next(c for c in CHECKS if c.scenario == scenario)
    row = run_check(check, session)
    assert row.result == "executed-pass", f"{scenario}: {row.result} after {row.assertions} assertion(s): {row.detail}"
    assert row.assertions > 0


# openwop-discovery-core


def test_v2_capabilities_root_closed(session: Session) -> None:
    """The v2 root validates ``capabilities.schema.json``; an unknown root key, ``host.replay``, ``capabilities: {}``
    or ``profiles: [...]`` injected into it does not."""
    witnessed("v2-capabilities-root-closed", session)


def test_v2_preferred_version_default(session: Session) -> None:
    """``preferredVersion`` is a listed ``major.minor``; header-less discovery answers in the preferred major; a
    header-less unversioned path answers major 2; a host listing a 1.x prefers major 1."""
    witnessed("v2-preferred-version-default", session)


def test_v2_version_header_honored(session: Session) -> None:
    """Discovery with and without ``OpenWOP-Version: 2.0`` both 200 with different bodies; the asked one names 2."""
    witnessed("v2-version-header-honored", session)


# openwop-core-standard


def test_v2_interrupt_token_scheme(session: Session) -> None:
    """An unprefixed token is 401 ``interrupt_token_invalid`` or 404; an ``ow2.`` token under an unheld kid is 401."""
    witnessed("v2-interrupt-token-scheme", session)


def test_v2_webhook_durable_delivery(session: Session) -> None:
    """Retried with widening gaps; exhausted, dead-lettered and readable without body, headers or secret; an
    unregistered subscription reads 404 as an unknown one; every subscribed event of a run arrives.

    The suite's receiver is a public https tunnel and the host's egress guard is fully on; here the receiver is
    on loopback, reachable only through ``--egress-allow-cidr 127.0.0.1/32`` (a test-rig relaxation, which
    ``tether certify`` lists in a bundle).
    """
    witnessed("v2-webhook-durable-delivery", session)


def test_v2_idempotency_key_grammar(session: Session) -> None:
    """A 22-character key creates (201); ``Idempotency-Key: short`` is ``400 idempotency_key_invalid``."""
    witnessed("v2-idempotency-key-grammar", session)


def test_v2_era_key(session: Session) -> None:
    """A new run's snapshot and the root both say ``eventLogSchemaVersion: 3``."""
    witnessed("v2-era-key", session)


def test_v2_era_stamp_universal(session: Session) -> None:
    """The root's integer era stamps a fresh run's snapshot; with the root at 3, a fresh run reads 3."""
    witnessed("v2-era-stamp-universal", session)


def test_v2_event_type_closed(session: Session) -> None:
    """Every polled event's type is registered (or a vendor type of a named org), validates, and rises."""
    witnessed("v2-event-type-closed", session)


def test_v2_poll_cursor_v2(session: Session) -> None:
    """The poll shape; first sequence 0; ``afterSequence`` exclusive; past the end ``[]``."""
    witnessed("v2-poll-cursor-v2", session)


def test_v2_run_cancel(session: Session) -> None:
    """A settled run: ``409 run_terminal``; a running ``conformance-cancellable`` run cancels within 5 s."""
    witnessed("v2-run-cancel", session)


def test_v2_run_bulk_cancel(session: Session) -> None:
    """101 ids: 400 with ``details.maxRunIds``; ``[a, foreign, b]``: in order, the foreign one ``ok: false``."""
    witnessed("v2-run-bulk-cancel", session)


def test_v2_run_pause_resume(session: Session) -> None:
    """Settled: ``409 run_terminal``; ``conformance-delay``: 202 paused, 409 ``runStatus: paused``, 202 running."""
    witnessed("v2-run-pause-resume", session)


def test_v2_run_options_limits(session: Session) -> None:
    """Tag limits and unknown root keys: ``400 validation_error``; odd tags and nested metadata round-trip."""
    witnessed("v2-run-options-limits", session)


def test_v2_sse_last_event_id(session: Session) -> None:
    """Numeric rising ids, server close, exclusive resume, nothing after the last id, ``state.snapshot`` first."""
    witnessed("v2-sse-last-event-id", session)


def test_v2_sse_last_event_id_cursor(session: Session) -> None:
    """Past the log: 200, nothing; ``abc``: 400 or accepted; other tenants' and unknown runs refused alike."""
    witnessed("v2-sse-last-event-id-cursor", session)


def _event_types() -> set[str]:
    """The enum union of ``run-event.schema.json`` ``properties.type.oneOf[*].enum`` (the pinned file)."""
    schema = json.loads((group_dirs()["schemas-v2"] / "openwop/v2/run-event.schema.json").read_text())
    return {t for branch in schema["properties"]["type"]["oneOf"] for t in branch.get("enum", [])}


def base36(number: int) -> str:
    """JavaScript's ``number.toString(36)``."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, digit = divmod(number, 36)
        out = digits[digit] + out
        if not number:
            return out


# beside the floor ---------------------------------------------------------------------------------


def test_v2_dual_stack_negotiation(host: Host, key: str, drv: httpx.Client, anon: httpx.Client) -> None:
    """v2-dual-stack-negotiation (both majors listed): leg 1 a run created header-less on ``/v1`` (major 1) reads
    at major 2 by its percent-encoded bare id; leg 2 major 9 is ``406`` naming the listed versions; leg 3
    ``/v1/openapi.json`` asked for 2.0 is ``400 protocol_version_mismatch``; leg 4 each answer's
    ``OpenWOP-Version`` is a listed version of the right major."""
    doc = discovery(anon)
    listed = doc["protocolVersions"]
    assert any(v.startswith("1.") for v in listed) and any(v.startswith("2.") for v in listed)
    auth = {"Accept": "application/json", "Authorization": f"Bearer {key}"}
    with host.client() as raw:
        v1 = raw.post("/v1/runs", json={"workflowId": NOOP}, headers=auth)
        assert v1.status_code == 201 and major(v1) == "1", v1.text
        v1_id = v1.json()["runId"]
        read = drv.get(f"/runs/{enc(v1_id)}")
        assert read.status_code == 200 and major(read) == "2", read.text
        got = read.json()["runId"]
        assert got == v1_id or (got.endswith("/" + v1_id) and got.count("/") == 1)

        nine = anon.get("/.well-known/openwop", headers={"OpenWOP-Version": "9.0"})
        assert nine.status_code == 406 and code_of(nine) == "protocol_version_unsupported"
        assert sorted(nine.json()["details"]["protocolVersions"]) == sorted(listed)
        mismatch = anon.get("/v1/openapi.json")
        assert mismatch.status_code == 400 and code_of(mismatch) == "protocol_version_mismatch", mismatch.text

        answers = [
            (raw.get("/v1/openapi.json", headers=auth), "1"),
            (raw.get("/v1/openapi.json", headers={**auth, "OpenWOP-Version": "1.0"}), "1"),
            (anon.get("/.well-known/openwop"), "2"),
        ]
    for answer, wanted in answers:
        assert major(answer) == wanted and answer.headers["openwop-version"].strip() in listed, answer.headers


_PROPRIETARY_HEADER = re.compile(r"^(x-openwop-.*|capabilities-etag|x-dedup|x-force-engine-version|x-pack-.*)$")


def test_v2_header_scheme(drv: httpx.Client, anon: httpx.Client) -> None:
    """v2-header-scheme: discovery, ``GET /runs/does-not-exist`` and ``POST /runs``; leg 1 none carries an
    ``X-openwop-*``, ``Capabilities-Etag``, ``X-Dedup``, ``X-Force-Engine-Version`` or ``X-Pack-*`` header; leg 2
    each names ``OpenWOP-Version`` of major 2, the refusal too."""
    answers = [
        anon.get("/.well-known/openwop"),
        drv.get("/runs/does-not-exist"),
        drv.post("/runs", json={"workflowId": NOOP}),
    ]
    for answer in answers:
        assert not [h for h in answer.headers if _PROPRIETARY_HEADER.match(h.lower())], answer.headers
        assert VERSION.fullmatch(answer.headers.get("openwop-version", "")) and major(answer) == "2", answer.headers


def test_v2_advertised_path_space_served(raw: httpx.Client, key: str) -> None:
    """v2-advertised-path-space-served: every parameterless GET of the v2 path manifest that ``/v1`` serves
    (anything but 404) is reached at major 2: not 404, with ``OpenWOP-Version``, not HTML; at least one is."""
    doc = raw.get("/.well-known/openwop", headers={"Accept": "application/json"})
    assert doc.status_code == 200 and any(v.startswith("2.") for v in doc.json()["protocolVersions"])
    auth = {"Accept": "application/json", "Authorization": f"Bearer {key}"}
    served, overstated = [], []
    for path in MANIFEST_PARAMETERLESS_GETS:
        if raw.get(f"/v1{path}", headers=auth).status_code == 404:
            continue
        served.append(path)
        answer = raw.get(path, headers={**auth, "OpenWOP-Version": "2.0"})
        reached = (
            answer.status_code != 404
            and "openwop-version" in answer.headers
            and not answer.headers.get("content-type", "").startswith("text/html")
        )
        if not reached:
            overstated.append((path, answer.status_code))
    assert served, "inapplicable: nothing pairable"
    assert not overstated, overstated


def test_v2_well_known_one_resource(raw: httpx.Client) -> None:
    """v2-well-known-one-resource (both majors listed): leg 1 discovery without and with ``OpenWOP-Version: 2.0`` are
    both 200 JSON objects listing the same versions, as different documents; leg 2 the v2 one has no
    ``capabilities``, ``host.*`` or ``profiles`` key and no ``Capabilities-Etag`` header."""
    plain = raw.get("/.well-known/openwop", headers={"Accept": "application/json"})
    v2 = raw.get("/.well-known/openwop", headers={"Accept": "application/json", "OpenWOP-Version": "2.0"})
    assert plain.status_code == v2.status_code == 200
    one, two = plain.json(), v2.json()
    assert isinstance(one, dict) and isinstance(two, dict)
    majors = {v.split(".")[0] for v in one["protocolVersions"]}
    assert {"1", "2"} <= majors, "inapplicable unless both majors are listed"
    assert sorted(one["protocolVersions"]) == sorted(two["protocolVersions"])
    assert json.dumps(one) != json.dumps(two)
    assert not [k for k in two if k in ("capabilities", "profiles") or k.startswith("host.")]
    assert "capabilities-etag" not in v2.headers


def test_v2_bound_id_path_projection(drv: httpx.Client, tenant_b_key: str, host: Host) -> None:
    """v2-bound-id-path-projection: leg 1 a noop run's bound id reads through its ``~2F`` projection, its
    ``eventsUrl`` carries the projection and no ``%2F``, a double projection is 404 (dual-stack) and a malformed
    escape 400; leg 2 no created id (tenant B's included) carries ``~``."""
    made = drv.post("/runs", json={"workflowId": NOOP})
    assert made.status_code == 201, f"blocked: {made.text}"
    run_id, events_url = made.json()["runId"], made.json()["eventsUrl"]
    assert BOUND_ID.fullmatch(run_id), "blocked: not a bound id"
    read = drv.get(f"/runs/{project(run_id)}")
    assert read.status_code == 200 and read.json()["runId"] == run_id
    if bare(run_id) in events_url:
        assert "%2f" not in events_url.lower() and project(run_id) in events_url, events_url
    twice = drv.get(f"/runs/{project(project(run_id))}")
    assert twice.status_code == 404, twice.text
    malformed = drv.get(f"/runs/{run_id.partition('/')[0]}~2")
    assert malformed.status_code == 400, malformed.text

    assert "~" not in run_id
    with host.client(tenant_b_key) as b:
        theirs = b.post("/runs", json={"workflowId": NOOP}, headers={"OpenWOP-Version": "2.0"})
    assert theirs.status_code == 201 and "~" not in theirs.json()["runId"]


def test_v2_id_grammar(drv: httpx.Client) -> None:
    """v2-id-grammar: leg 1 a noop run's id is bound and its snapshot validates ``run-snapshot``; leg 2 its polled
    events validate ``run-event`` and carry its id; leg 3 a forged foreign id is ``403 id_tenant_mismatch`` or
    ``404 not_found``; leg 4 its bare id reads the same run on a dual-stack host."""
    run_id = created(drv, {"workflowId": NOOP})
    assert re.fullmatch(r"^[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$", run_id)
    snapshot = drv.get(f"/runs/{enc(run_id)}")
    assert snapshot.status_code == 200
    openwop_validator("v2/run-snapshot").validate(snapshot.json())
    events = poll(drv, run_id)["events"]
    assert events
    for event in events:
        check_event(event)
        assert event["runId"] == run_id
    foreign = drv.get(f"/runs/{enc(FOREIGN_RUN_ID)}")
    assert (foreign.status_code, code_of(foreign)) in ((403, "id_tenant_mismatch"), (404, "not_found")), foreign.text
    by_bare = drv.get(f"/runs/{enc(bare(run_id))}")
    assert by_bare.status_code == 200 and by_bare.json()["runId"] == run_id


def test_v2_error_registry(drv: httpx.Client) -> None:
    """v2-error-registry legs 1-3: ``GET /runs/does-not-exist`` is refused in the v2 envelope at its code's
    registered status, with no ``retryAfter*`` in ``details``; three of them answer no 429 (or a 429 is
    ``rate_limited`` with ``Retry-After``)."""
    answer = drv.get("/runs/does-not-exist")
    assert answer.status_code >= 400, "blocked"
    body = envelope(answer)
    if body["error"] in REGISTERED_STATUS:
        assert answer.status_code == REGISTERED_STATUS[body["error"]], (answer.status_code, body)
    assert not {"retryAfter", "retryAfterMs", "retryAfterSeconds"} & set(body.get("details") or {})
    burst = [drv.get("/runs/does-not-exist") for _ in range(3)]
    for again in burst:
        if again.status_code == 429:
            assert code_of(again) == "rate_limited" and "retry-after" in again.headers


def test_v2_malformed_body_envelope(host: Host, key: str) -> None:
    """v2-malformed-body-envelope: ``{`` posted to ``/runs`` and to ``/webhooks`` is ``400 validation_error`` in the
    v2 envelope (JSON, not HTML), naming ``OpenWOP-Version``."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "OpenWOP-Version": "2.0",
        "Authorization": f"Bearer {key}",
    }
    with host.client() as raw:
        for path in ("/runs", "/webhooks"):
            answer = raw.post(path, content=b"{", headers=headers)
            assert "openwop-version" in answer.headers
            assert answer.status_code != 404, f"{path}: inapplicable (not mounted)"
            assert answer.status_code == 400, (path, answer.text)
            assert not answer.headers.get("content-type", "").startswith("text/html")
            assert envelope(answer)["error"] == "validation_error"


def test_v2_run_completed_outputs(drv: httpx.Client) -> None:
    """v2-run-completed-outputs: a noop run's ``run.completed`` carries an object ``payload.outputs`` and the event
    validates ``run-event``."""
    run_id = created(drv, {"workflowId": NOOP})

    def completed() -> dict[str, Any] | None:
        events = poll(drv, run_id)["events"]
        ended = [e for e in events if e["type"] in ("run.completed", "run.failed", "run.cancelled")]
        if ended:
            assert ended[0]["type"] == "run.completed", f"blocked: {ended[0]['type']}"
            return ended[0]
        return None

    event = wait_until(completed, timeout=5.0, interval=0.25, what="run.completed")
    outputs = event["payload"]["outputs"]
    assert isinstance(outputs, dict)
    check_event(event)


def test_v2_stream_mode_refusal(host: Host, key: str, drv: httpx.Client) -> None:
    """v2-stream-mode-refusal: leg 1 a bogus mode is ``400 unsupported_stream_mode`` naming ``supported`` (with
    ``updates``) for an SSE or a JSON ``Accept``, so is ``updates,values`` and any unserved mode; leg 2 the
    ``updates`` stream has frames and no ``batch``, and with ``bufferMs=200`` it has ``batch`` frames of JSON
    arrays whose events are the same sequences."""
    run_id = noop_settled(drv)
    path = f"/runs/{enc(run_id)}/events"
    bogus = drv.get(f"{path}?streamMode=bogus", headers={"Accept": "text/event-stream"})
    assert bogus.status_code != 404, "blocked"
    assert bogus.status_code == 400 and code_of(bogus) == "unsupported_stream_mode", bogus.text
    supported = envelope(bogus)["details"]["supported"]
    assert supported and set(supported) <= set(STREAM_MODES) and "updates" in supported
    as_json = drv.get(f"{path}?streamMode=bogus")
    assert as_json.status_code == 400, as_json.text
    mixed = drv.get(f"{path}?streamMode=updates,values", headers={"Accept": "text/event-stream"})
    assert mixed.status_code == 400 and code_of(mixed) == "unsupported_stream_mode"
    unserved = [m for m in STREAM_MODES if m not in supported]
    if unserved:
        refused = drv.get(f"{path}?streamMode={unserved[0]}", headers={"Accept": "text/event-stream"})
        assert refused.status_code == 400 and code_of(refused) == "unsupported_stream_mode"

    plain = subscribe(host, key, f"{path}?streamMode=updates")
    assert plain.status == 200 and plain.frames and plain.closed_by == "server"
    assert not [f for f in plain.frames if f.get("event") == "batch"]
    batched = subscribe(host, key, f"{path}?streamMode=updates&bufferMs=200")
    assert batched.status == 200
    batches = [f for f in batched.frames if f.get("event") == "batch"]
    assert batches
    sequences: list[int] = []
    for frame in batched.frames:
        doc = json.loads(frame["data"])
        if frame.get("event") == "batch":
            assert isinstance(doc, list)
        sequences += [d["sequence"] for d in (doc if isinstance(doc, list) else [doc])]
    assert sequences == [json.loads(f["data"])["sequence"] for f in plain.frames]


def test_v2_owner_subject_required(drv: httpx.Client) -> None:
    """v2-owner-subject-required: a noop run's ``owner`` is ``{tenant, subject}`` (``subject`` valid against
    ``subject.schema.json``), with no ``principal`` or ``principalKind``."""
    run_id = created(drv, {"workflowId": NOOP})
    snapshot = drv.get(f"/runs/{enc(run_id)}")
    assert snapshot.status_code == 200
    owner = snapshot.json()["owner"]
    assert isinstance(owner, dict)
    openwop_validator("v2/subject").validate(owner["subject"])
    assert isinstance(owner["tenant"], str)
    assert "principal" not in owner and "principalKind" not in owner
    assert set(owner) <= {"tenant", "workspace", "subject"}


def test_v2_payload_registry_closed(drv: httpx.Client) -> None:
    """v2-payload-registry-closed: each event of a settled noop run whose type the v2 enum lists has a ``_typeIndex``
    row, and its payload validates the closed ``$defs`` entry that row names."""
    payloads = json.loads((group_dirs()["schemas-v2"] / "openwop/v2/run-event-payloads.schema.json").read_text())
    index = payloads["_typeIndex"]["properties"]
    known = _event_types()
    for event in poll(drv, noop_settled(drv))["events"]:
        if event["type"] not in known:
            continue
        ref = index[event["type"]]["$ref"]
        assert ref.startswith("#/$defs/"), ref
        openwop_validator(f"v2/run-event-payloads{ref}").validate(event["payload"])


def test_v2_idempotency_in_flight(host: Host, key: str) -> None:
    """v2-idempotency-in-flight: five parallel creates of ``conformance-delay`` under one key make one run; every
    replay says ``OpenWOP-Idempotent-Replay: true`` and only the first does not; a refusal is ``409
    idempotency_in_flight`` with no ``details.retryAfter*`` and an integer or HTTP-date ``Retry-After``."""
    idempotency_key = f"openwopconf-inflight-{base36(time.time_ns() // 1_000_000)}-{base36(secrets.randbits(40))[:8]}"
    assert len(idempotency_key) >= 22
    headers = {
        "Accept": "application/json",
        "OpenWOP-Version": "2.0",
        "Authorization": f"Bearer {key}",
        "Idempotency-Key": idempotency_key,
    }
    body = {"workflowId": DELAY, "inputs": {"delayMs": 1500}}
    start = threading.Barrier(5)

    def post(_: int) -> httpx.Response:
        with host.client() as client:
            start.wait(10)
            return client.post("/runs", json=body, headers=headers)

    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(post, range(5)))
    assert not all(a.status_code in (404, 422) for a in answers), "blocked"
    made = [a for a in answers if 200 <= a.status_code < 300]
    assert made, [a.text for a in answers]
    assert len({a.json()["runId"] for a in made}) == 1
    assert sum(a.headers.get("openwop-idempotent-replay") != "true" for a in made) == 1
    for refused in (a for a in answers if not 200 <= a.status_code < 300):
        assert refused.status_code == 409 and code_of(refused) == "idempotency_in_flight", refused.text
        assert not {"retryAfter", "retryAfterMs", "retryAfterSeconds"} & set(envelope(refused).get("details") or {})
        retry_after = refused.headers.get("retry-after")
        if retry_after is not None:
            assert retry_after.isdigit() or parsedate_to_datetime(retry_after) is not None, retry_after


def test_v2_unadvertised_operation_not_found(drv: httpx.Client, anon: httpx.Client) -> None:
    """v2-unadvertised-operation-not-found: with ``prompts.endpointsSupported`` unclaimed ``GET /prompts``, and with
    no ``content`` family ``GET /content/settings``, are ``404 not_found`` in the v2 envelope."""
    doc = discovery(anon)
    assert (doc.get("prompts") or {}).get("endpointsSupported") is not True
    assert "content" not in doc
    for path in ("/prompts", "/content/settings"):
        answer = drv.get(path)
        assert answer.status_code == 404 and code_of(answer) == "not_found", (path, answer.text)
        assert major(answer) == "2"
        envelope(answer)


def test_v2_client_version_header(anon: httpx.Client) -> None:
    """v2-client-version-header: with no ``minClientVersion`` advertised (legs 1-2 inapplicable), leg 3 discovery
    without ``OpenWOP-Client-Version`` is not 426 and leg 4 with ``0.0.1`` is a 2xx."""
    doc = discovery(anon)
    assert "minClientVersion" not in doc
    assert anon.get("/.well-known/openwop").status_code != 426
    old = anon.get("/.well-known/openwop", headers={"OpenWOP-Client-Version": "0.0.1"})
    assert 200 <= old.status_code < 300 and old.status_code != 426
