"""Our replica of the official OpenWOP v2 conformance suite's floor, and of the v2 files beside it, against a real host.

The suite (``conformance/src/scenarios/*.test.ts`` of openwop/openwop, run with
``OPENWOP_TARGET_MAJOR=2``) cannot run here: its npm package is not on the registry. So
each test below is one scenario file, named after it, making the requests the file makes
and every assertion it makes, with the official v2 schemas (the pinned oracle) as the
validators. Issue 25 is done when ``openwop-discovery-core`` certifies (3/3 floor files) and
the ``openwop-core-standard`` floor files other than ``v2-effect-seam-manifest`` pass with 0
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

import base64
import copy
import json
import math
import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import trustme
from backends import suite_host
from harness import Host, wait_until
from jsonschema import ValidationError
from keys import made_key
from receiver import Received, Receiver, egress_to
from schemas import fixtures_v2_dir, group_dirs, openwop_validator

NOOP = "conformance-noop"
CANCELLABLE = "conformance-cancellable"
DELAY = "conformance-delay"
FAILURE = "conformance-failure"
TERMINAL = ("completed", "failed", "cancelled")
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
#: the vendor event-type grammar ``v2-event-type-closed`` admits (its org must be in the root's ``extensions``)
VENDOR_TYPE = re.compile(
    r"^(?!openwop\.)[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9]*(-[a-z0-9]+)*(\.[a-z][a-z0-9]*(-[a-z0-9]+)*)?$"
)
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


def code_of(response: httpx.Response) -> str | None:
    """The suite's ``readErrorCode``: ``error`` when a string, else the legacy ``error.code``."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return str(error["code"])
    return None


def major(response: httpx.Response) -> str:
    """The major the answer names in ``OpenWOP-Version`` (``""`` when it names none)."""
    return response.headers.get("openwop-version", "").strip().split(".")[0]


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


def fixture_listed(doc: dict[str, Any], fixture: str) -> None:
    assert fixture in (doc.get("fixtures") or []), f"{fixture} is not in the root's fixtures[]: the leg is not run"


def created(drv: httpx.Client, body: dict[str, Any], **headers: str) -> str:
    answer = drv.post("/runs", json=body, headers=headers)
    assert answer.status_code == 201, f"blocked: POST /runs answered {answer.status_code} {answer.text}"
    run_id = answer.json()["runId"]
    assert isinstance(run_id, str)
    return run_id


def status_of(drv: httpx.Client, run_id: str) -> str | None:
    answer = drv.get(f"/runs/{enc(run_id)}")
    return str(answer.json().get("status")) if answer.status_code == 200 else None


def settled(drv: httpx.Client, run_id: str, *statuses: str, timeout: float = 10.0) -> str:
    """The run's status once it is one of ``statuses`` (terminal by default), as the suite polls for it."""
    wanted = statuses or TERMINAL
    found: str = wait_until(
        lambda: (s := status_of(drv, run_id)) in wanted and s,
        timeout=timeout,
        interval=0.05,
        what=f"run {run_id} to be {'|'.join(wanted)} (the suite records blocked)",
    )
    return found


def noop_settled(drv: httpx.Client, **body: Any) -> str:
    run_id = created(drv, {"workflowId": NOOP, **body})
    settled(drv, run_id)
    return run_id


def poll(drv: httpx.Client, run_id: str, query: str = "") -> dict[str, Any]:
    answer = drv.get(f"/runs/{enc(run_id)}/events/poll?timeout=1{query}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def check_event(event: dict[str, Any]) -> None:
    openwop_validator("v2/run-event").validate(event)


@dataclass
class Stream:
    """What the suite's ``subscribe`` returns: the status, the frames that carried data, who closed the stream."""

    status: int
    frames: list[dict[str, str]] = field(default_factory=list)
    closed_by: str = "server"

    @property
    def ids(self) -> list[int]:
        return [int(f["id"]) for f in self.frames if re.fullmatch(r"-?[0-9]+", f.get("id", ""))]


def subscribe(host: Host, key: str, path: str, *, timeout: float = 8.0, last_event_id: str | None = None) -> Stream:
    """lib/sse.ts ``subscribe``: a raw SSE GET (``OpenWOP-Version: 2.0`` as its extra header), read until the server
    closes it or ``timeout`` passes; a frame counts when it has a ``data:`` line, comments are skipped."""
    headers = {
        "Accept": "text/event-stream",
        "Authorization": f"Bearer {key}",
        "Cache-Control": "no-cache",
        "OpenWOP-Version": "2.0",
    }
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=host.url, timeout=timeout) as client, client.stream("GET", path, headers=headers) as r:
        if r.status_code != 200:
            r.read()
            return Stream(r.status_code)
        stream = Stream(200)
        fields: dict[str, str] = {}
        data: list[str] = []
        try:
            for line in r.iter_lines():
                if line == "":
                    if data:
                        stream.frames.append({**fields, "data": "\n".join(data)})
                    fields, data = {}, []
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    if name == "data":
                        data.append(value)
                    else:
                        fields[name] = value
                if time.monotonic() > deadline:
                    stream.closed_by = "client"
                    break
        except httpx.ReadTimeout:
            stream.closed_by = "client"
        return stream


# openwop-discovery-core ---------------------------------------------------------------------------


def test_v2_capabilities_root_closed(anon: httpx.Client) -> None:
    """v2-capabilities-root-closed: leg 1 the v2 root validates ``capabilities.schema.json``; legs 2-5 the root with
    an unknown root key, ``host.replay``, ``capabilities: {}`` or ``profiles: [...]`` injected fails it."""
    doc = discovery(anon)
    validator = openwop_validator("v2/capabilities")
    validator.validate(doc)
    record = {"status": "stable", "since": "2.0", "witness": "claims-check"}
    for injected in (
        {"openwopConformanceUnknownRootKey": record},
        {"host.replay": record},
        {"capabilities": {}},
        {"profiles": ["openwop-discovery-core"]},
    ):
        with pytest.raises(ValidationError):
            validator.validate({**copy.deepcopy(doc), **injected})


def test_v2_preferred_version_default(anon: httpx.Client, raw: httpx.Client, key: str) -> None:
    """v2-preferred-version-default: leg 1 ``preferredVersion`` is a listed ``major.minor``; leg 2 a header-less
    discovery answers in the preferred major; leg 3 a header-less unversioned path answers major 2; leg 4 a host
    listing a 1.x prefers major 1."""
    doc = discovery(anon)
    preferred = doc["preferredVersion"]
    assert VERSION.fullmatch(preferred) and preferred in doc["protocolVersions"]
    if len(doc["protocolVersions"]) == 1:
        assert doc.get("protocolVersion", preferred) == preferred

    bare_doc = raw.get("/.well-known/openwop", headers={"Accept": "application/json"})
    assert bare_doc.status_code == 200
    assert major(bare_doc) == preferred.split(".")[0]
    body = bare_doc.json()
    if preferred.split(".")[0] == "2":
        openwop_validator("v2/capabilities").validate(body)
    else:
        assert isinstance(body["protocolVersion"], str) and isinstance(body["protocolVersions"], list)
        assert isinstance(body["preferredVersion"], str)

    probe = raw.get(
        "/runs/openwop-conformance~2F" + "h" * 22,
        headers={"Accept": "application/json", "Authorization": f"Bearer {key}"},
    )
    assert major(probe) == "2", (probe.status_code, probe.headers)

    assert any(v.startswith("1.") for v in doc["protocolVersions"]), "leg 4 is inapplicable without a 1.x listed"
    assert preferred.split(".")[0] == "1"


def test_v2_version_header_honored(raw: httpx.Client, key: str) -> None:
    """v2-version-header-honored: leg 1 discovery with and without ``OpenWOP-Version: 2.0`` both 200, the bodies
    differ (a host listing no 1.x would owe a 406 for ``1``); leg 2 with both majors listed the asked one is
    200, other bytes, and names major 2."""
    headers = {"Accept": "application/json", "authorization": f"Bearer {key}"}
    bare_doc = raw.get("/.well-known/openwop", headers=headers)
    asked = raw.get("/.well-known/openwop", headers={**headers, "OpenWOP-Version": "2.0"})
    assert bare_doc.status_code == 200, "blocked"
    listed = bare_doc.json()["protocolVersions"]
    if not any(v.startswith("1.") for v in listed):
        one = raw.get("/.well-known/openwop", headers={**headers, "OpenWOP-Version": "1"})
        assert one.status_code == 406 and code_of(one) == "protocol_version_unsupported"
        assert sorted(one.json()["details"]["protocolVersions"]) == sorted(listed)
    assert asked.status_code == 200, f"blocked: asked answered {asked.status_code}"
    assert asked.content != bare_doc.content

    majors = {v.split(".")[0] for v in listed}
    assert {"1", "2"} <= majors, "leg 2 is inapplicable unless both majors are listed"
    assert asked.status_code == 200 and asked.content != bare_doc.content
    assert major(asked) == "2"


# openwop-core-standard ----------------------------------------------------------------------------

UNPREFIXED = "b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef"
UNHELD_KID = "ow2.hs256.nokid.b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef"


def test_v2_interrupt_token_scheme(anon: httpx.Client) -> None:
    """v2-interrupt-token-scheme: unauthenticated ``GET /interrupts/{token}``; leg 1 an unprefixed token is 401
    ``interrupt_token_invalid`` or 404; leg 2 an ``ow2.`` token under a kid the host does not hold is 401
    ``interrupt_token_invalid`` (the token is checked before any key is asked for)."""
    unprefixed = anon.get(f"/interrupts/{enc(UNPREFIXED)}")
    assert unprefixed.status_code in (401, 404), unprefixed.text
    if unprefixed.status_code == 401:
        assert code_of(unprefixed) == "interrupt_token_invalid"
    else:
        assert code_of(unprefixed) in ("not_found", "interrupt_not_found")
    unheld = anon.get(f"/interrupts/{enc(UNHELD_KID)}")
    assert not (unprefixed.status_code == 404 and unheld.status_code == 404), "inapplicable: both probes 404"
    assert unheld.status_code == 401 and code_of(unheld) == "interrupt_token_invalid", unheld.text
    envelope(unheld)


def _retry_wait(doc: dict[str, Any]) -> float:
    """How long the suite waits on a retry: 20 s, or 90 s when an exponential or fixed backoff is advertised."""
    policy = (doc.get("webhooks") or {}).get("retryPolicy") or {}
    return 90.0 if policy.get("backoff") in ("exponential", "fixed") else 20.0


def _register(drv: httpx.Client, url: str, events: list[str]) -> str:
    answer = drv.post("/webhooks", json={"url": url, "events": events})
    assert not (answer.status_code == 400 and code_of(answer) == "webhook_url_rejected"), (
        f"the receiver was refused: {answer.text}"
    )
    assert answer.status_code == 201, answer.text
    webhook_id = answer.json()["webhookId"]
    assert isinstance(webhook_id, str)
    return webhook_id


class Exercise:
    """One leg's scoped receiver and subscription, unregistered and closed when the leg ends (the suite's
    ``afterEach``)."""

    def __init__(self, drv: httpx.Client, rx: Receiver, receivers: ScopedReceivers, fail_first: float) -> None:
        self.drv, self.rx, self.receivers = drv, rx, receivers
        self.path = receivers.exercise(fail_first)
        self.webhook_id = ""
        self.run_id = ""

    def __enter__(self) -> Exercise:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.webhook_id:
            self.drv.delete(f"/webhooks/{enc(self.webhook_id)}")
        self.receivers.close(self.path)

    def register(self, events: list[str]) -> str:
        self.webhook_id = _register(self.drv, self.rx.url(self.path), events)
        return self.webhook_id

    def run(self, timeout: float = 10.0) -> str:
        self.run_id = created(self.drv, {"workflowId": NOOP})
        settled(self.drv, self.run_id, timeout=timeout)
        return self.run_id

    def ours(self) -> list[Attempt]:
        """This leg's attempts: its run's, to its subscription (another leg's traffic is not counted)."""
        return [
            a for a in self.receivers.attempts(self.path) if a.run_id == self.run_id and a.webhook_id == self.webhook_id
        ]


def _exhausted(leg: int, ex: Exercise, max_attempts: Any, wait: float) -> list[dict[str, Any]]:
    """Legs 2 and 5: a delivery that never succeeds is retried, stops at ``maxAttempts``, and the dead-letter
    read lists it a second after the last attempt (the suite waits, then reads once)."""
    wait_until(lambda: len(ex.ours()) > 1, timeout=wait, what=f"leg {leg}: a 500 to be retried")
    if isinstance(max_attempts, int):
        wait_until(lambda: len(ex.ours()) >= max_attempts, timeout=wait, what=f"leg {leg}: maxAttempts attempts")

    def listed() -> list[dict[str, Any]] | None:
        page = ex.drv.get(f"/webhooks/{project(ex.webhook_id)}/dead-letters")
        assert page.status_code == 200, f"leg {leg}: {page.text}"
        openwop_validator("v2/webhook-dead-letter-page").validate(page.json())
        rows: list[dict[str, Any]] = page.json()["deliveries"]
        return rows if any(row.get("runId") == ex.run_id for row in rows) else None

    rows = wait_until(listed, timeout=1.0, what=f"leg {leg}: the exhausted delivery in the dead-letter read")
    assert len(ex.ours()) > 1
    if isinstance(max_attempts, int):
        assert len(ex.ours()) <= max_attempts, f"leg {leg}: retries must stop at maxAttempts ({max_attempts})"
    return rows


def test_v2_webhook_durable_delivery(
    drv: httpx.Client, anon: httpx.Client, rx: Receiver, receivers: ScopedReceivers
) -> None:
    """v2-webhook-durable-delivery, gated on ``webhooks`` and ``conformance-noop`` in ``fixtures``; its legs in
    order, each with a receiver, subscription and noop run of its own (attempts matched by run and subscription).

    Leg 1: a receiver failing the first ``clamp(maxAttempts-1, 1, 2)`` attempts per delivery key: the run's
    ``run.completed`` is retried and lands (204); the gaps are positive and, exponential, the second at least
    1.25 times the first; ``DELETE`` is 204. Leg 2: a receiver that never succeeds: more than one attempt, at
    most ``maxAttempts``, and (``deadLetter`` advertised) the dead-letter read lists the run a second after the
    last attempt. Leg 3: a subscription to ``https://subscriber.invalid/hook`` is taken and its dead-letter read
    served. Leg 4: after unregister the read is ``404 not_found``, exactly as for a same-tenant id never minted.
    Leg 5: an exhausted delivery's dead letters carry no body, headers or secret. Leg 6: every logged
    ``run.started``/``node.started``/``node.completed``/``run.completed`` of a noop run reaches a healthy receiver.

    The suite's receiver is a public https tunnel and the host's egress guard is fully on; here the receiver is
    on loopback, reachable only through ``--egress-allow-cidr 127.0.0.1/32`` (a test-rig relaxation).
    """
    doc = discovery(anon)
    family = doc.get("webhooks")
    assert isinstance(family, dict), "inapplicable: the webhooks family is not advertised"
    fixture_listed(doc, NOOP)
    policy = family.get("retryPolicy") or {}
    max_attempts = policy.get("maxAttempts")
    fail_first = 2 if not isinstance(max_attempts, int) else max(1, min(2, max_attempts - 1))
    wait = _retry_wait(doc)
    assert family.get("deadLetter"), "legs 2-5 are inapplicable without the deadLetter facet"

    with Exercise(drv, rx, receivers, fail_first) as leg1:
        leg1.register(["run.completed"])
        leg1.run()
        wait_until(lambda: any(a.status == 204 for a in leg1.ours()), timeout=wait, what="leg 1: the retry to land")
        attempts = leg1.ours()
        assert len(attempts) > 1, "leg 1: a 500 must be retried"
        if policy.get("backoff") not in (None, "none"):
            by_key: dict[str, list[float]] = {}
            for attempt in attempts:
                by_key.setdefault(attempt.key, []).append(attempt.at)
            for times in by_key.values():
                gaps = [b - a for a, b in zip(times, times[1:])]
                assert all(g > 0 for g in gaps), gaps
                if policy["backoff"] == "exponential" and len(times) >= 3:
                    assert gaps[1] - gaps[0] >= 0.25 * gaps[0], f"leg 1: exponential gaps must widen: {gaps}"
        assert drv.delete(f"/webhooks/{enc(leg1.webhook_id)}").status_code == 204
        leg1.webhook_id = ""

    with Exercise(drv, rx, receivers, math.inf) as leg2:
        leg2.register(["run.completed"])
        leg2.run()
        _exhausted(2, leg2, max_attempts, wait)

    for leg in (3, 4):
        webhook_id = _register(drv, "https://subscriber.invalid/hook", ["run.completed"])
        assert "/" in webhook_id, f"leg {leg}: blocked, {webhook_id!r} is not tenant-bound"
        live = drv.get(f"/webhooks/{project(webhook_id)}/dead-letters")
        assert drv.delete(f"/webhooks/{enc(webhook_id)}").status_code == 204
        assert live.status_code == 200, f"leg {leg}: {live.text}"
        openwop_validator("v2/webhook-dead-letter-page").validate(live.json())
        if leg == 4:
            after = drv.get(f"/webhooks/{project(webhook_id)}/dead-letters")
            tenant = webhook_id.partition("/")[0]
            never_id = f"{tenant}/never-{base36(time.time_ns() // 1_000_000)}{base36(secrets.randbits(41))[:8]}"
            never = drv.get(f"/webhooks/{project(never_id)}/dead-letters")
            assert [after.status_code, code_of(after)] == [404, "not_found"], after.text
            assert [after.status_code, code_of(after)] == [never.status_code, code_of(never)], never.text

    with Exercise(drv, rx, receivers, math.inf) as leg5:
        leg5.register(["run.completed"])
        leg5.run()
        rows = _exhausted(5, leg5, max_attempts, wait)
        assert rows and all(not {"body", "headers", "secret"} & set(row) for row in rows), rows

    complete_types = ["run.started", "node.started", "node.completed", "run.completed"]
    with Exercise(drv, rx, receivers, 0) as leg6:
        leg6.register(complete_types)
        leg6.run(timeout=30.0)
        want = {e["sequence"]: e["type"] for e in poll(drv, leg6.run_id)["events"] if e["type"] in complete_types}
        assert want, "leg 6: blocked, nothing of a subscribed type in the log"

        def missing() -> list[int]:
            got = {
                a.sequence
                for a in receivers.attempts(leg6.path)
                if a.run_id and bare(a.run_id) == bare(leg6.run_id) and bare(a.webhook_id) == bare(leg6.webhook_id)
            }
            return sorted(set(want) - got)

        wait_until(lambda: not missing(), timeout=wait, what="leg 6: every subscribed event delivered")


def base36(number: int) -> str:
    """JavaScript's ``number.toString(36)``."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, digit = divmod(number, 36)
        out = digits[digit] + out
        if not number:
            return out


def test_v2_idempotency_key_grammar(drv: httpx.Client) -> None:
    """v2-idempotency-key-grammar: leg 1 a key of 16 random bytes in base64url (22 characters) creates (201);
    leg 2 ``Idempotency-Key: short`` is ``400 idempotency_key_invalid``."""
    good = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
    assert len(good) == 22
    first = drv.post("/runs", json={"workflowId": NOOP}, headers={"Idempotency-Key": good})
    assert first.status_code == 201, first.text
    short = drv.post("/runs", json={"workflowId": NOOP}, headers={"Idempotency-Key": "short"})
    assert short.status_code == 400 and code_of(short) == "idempotency_key_invalid", short.text
    envelope(short)


def test_v2_era_key(drv: httpx.Client, anon: httpx.Client) -> None:
    """v2-era-key: leg 1 a noop run's snapshot says ``eventLogSchemaVersion: 3``; leg 2 so does the root, an
    integer equal to a fresh run's."""
    run_id = created(drv, {"workflowId": NOOP})
    snapshot = drv.get(f"/runs/{enc(run_id)}")
    assert snapshot.status_code == 200
    assert snapshot.json()["eventLogSchemaVersion"] == 3
    doc = discovery(anon)
    era = doc["eventLogSchemaVersion"]
    assert isinstance(era, int) and not isinstance(era, bool) and era == 3
    fresh = created(drv, {"workflowId": NOOP})
    assert drv.get(f"/runs/{enc(fresh)}").json()["eventLogSchemaVersion"] == era


def test_v2_era_stamp_universal(drv: httpx.Client, anon: httpx.Client) -> None:
    """v2-era-stamp-universal: leg 1 the root's integer ``eventLogSchemaVersion`` stamps a fresh run's snapshot;
    leg 2 with the root at 3, a fresh run reads 3."""
    doc = discovery(anon)
    assert "eventLogSchemaVersion" in doc, "inapplicable without the root's eventLogSchemaVersion"
    era = doc["eventLogSchemaVersion"]
    assert isinstance(era, int) and not isinstance(era, bool)
    run_id = created(drv, {"workflowId": NOOP, "inputs": {}})
    assert drv.get(f"/runs/{enc(run_id)}").json()["eventLogSchemaVersion"] == era
    assert era == 3, "leg 2 is inapplicable unless the root says 3"
    fresh = created(drv, {"workflowId": NOOP, "inputs": {}})
    assert drv.get(f"/runs/{enc(fresh)}").json()["eventLogSchemaVersion"] == 3


def _event_types() -> set[str]:
    """The enum union of ``run-event.schema.json`` ``properties.type.oneOf[*].enum`` (the pinned file)."""
    schema = json.loads((group_dirs()["schemas-v2"] / "openwop/v2/run-event.schema.json").read_text())
    return {t for branch in schema["properties"]["type"]["oneOf"] for t in branch.get("enum", [])}


def test_v2_event_type_closed(drv: httpx.Client, anon: httpx.Client) -> None:
    """v2-event-type-closed: a settled noop run's polled events; leg 1 every type is in the v2 enum or a vendor
    type of an org the root's ``extensions`` names; leg 2 every event validates ``run-event`` and the sequences
    rise strictly."""
    doc = discovery(anon)
    events = poll(drv, noop_settled(drv))["events"]
    assert events, "blocked: no events"
    known = _event_types()
    orgs = {name.split(".")[0] for name in (doc.get("extensions") or {})}
    for event in events:
        kind = event["type"]
        assert kind in known or (VENDOR_TYPE.fullmatch(kind) and kind.split(".")[0] in orgs), kind
    last = -1
    for event in events:
        check_event(event)
        assert isinstance(event["sequence"], int) and event["sequence"] > last
        last = event["sequence"]


def test_v2_poll_cursor_v2(drv: httpx.Client) -> None:
    """v2-poll-cursor-v2: a settled noop run; leg 1 the poll answer is exactly ``{events, isTerminal,
    lastSequence, runId, status}`` with the created bound id; leg 2 the first sequence is 0; leg 3
    ``afterSequence=<first>`` is exclusive; leg 4 past the end is 200 ``[]``."""
    run_id = noop_settled(drv)
    page = poll(drv, run_id)
    assert sorted(page) == ["events", "isTerminal", "lastSequence", "runId", "status"]
    assert page["runId"] == run_id and isinstance(page["events"], list)
    assert isinstance(page["lastSequence"], int) and page["lastSequence"] >= -1
    assert isinstance(page["status"], str) and isinstance(page["isTerminal"], bool)
    sequences = [e["sequence"] for e in page["events"]]
    assert max(sequences) <= page["lastSequence"]
    assert sequences[0] == 0
    first = sequences[0]
    after = poll(drv, run_id, f"&afterSequence={first}")
    assert all(e["sequence"] > first for e in after["events"])
    assert after["events"] == [e for e in poll(drv, run_id)["events"] if e["sequence"] > first]
    past = poll(drv, run_id, f"&afterSequence={page['lastSequence'] + 1000}")
    assert past["events"] == []


def test_v2_run_cancel(drv: httpx.Client, anon: httpx.Client) -> None:
    """v2-run-cancel: leg 1 cancelling a settled noop run is ``409 run_terminal``; leg 2 a running
    ``conformance-cancellable`` run cancels (200, its bound id, ``cancelling|cancelled``), reads ``cancelled``
    within 5 s, and its log has ``run.cancelled``."""
    done = noop_settled(drv)
    again = drv.post(f"/runs/{enc(done)}/cancel", json={})
    assert again.status_code == 409 and code_of(again) == "run_terminal", again.text
    envelope(again)

    fixture_listed(discovery(anon), CANCELLABLE)
    run_id = created(drv, {"workflowId": CANCELLABLE, "inputs": {"delayMs": 15000}})
    settled(drv, run_id, "running", timeout=5.0)
    answer = drv.post(f"/runs/{enc(run_id)}/cancel", json={"reason": "conformance"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["runId"] == run_id and answer.json()["status"] in ("cancelling", "cancelled")
    settled(drv, run_id, "cancelled", timeout=5.0)
    assert "run.cancelled" in [e["type"] for e in poll(drv, run_id)["events"]]


def test_v2_run_bulk_cancel(drv: httpx.Client) -> None:
    """v2-run-bulk-cancel: leg 1 101 ids is ``400 validation_error`` with a root ``details.maxRunIds`` in 1..100;
    leg 2 ``[a, foreign, b]`` is 200 with three results in request order, the foreign one ``ok: false`` with a
    v2 envelope (``id_tenant_mismatch`` or ``not_found``), each own one cancelled or ``run_terminal``."""
    capped = drv.post(
        "/runs:bulk-cancel",
        json={"runIds": [f"openwop-conformance-bulk-cap/opaque{i:03d}0123456789abcdef" for i in range(101)]},
    )
    assert capped.status_code != 404, "blocked: bulk-cancel is not mounted"
    assert capped.status_code == 400 and code_of(capped) == "validation_error", capped.text
    limit = envelope(capped)["details"]["maxRunIds"]
    assert isinstance(limit, int) and 1 <= limit <= 100

    a, b = created(drv, {"workflowId": NOOP}), created(drv, {"workflowId": NOOP})
    named = [a, FOREIGN_RUN_ID, b]
    answer = drv.post("/runs:bulk-cancel", json={"runIds": named, "reason": "conformance"})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert len(results) == 3 and [r["runId"] for r in results] == named
    foreign = results[1]
    assert foreign["ok"] is False
    openwop_validator("v2/error-envelope").validate(foreign["error"])
    assert foreign["error"]["error"] in ("id_tenant_mismatch", "not_found")
    for own in (results[0], results[2]):
        if own["ok"]:
            assert own["status"] in ("cancelling", "cancelled"), own
        else:
            assert own["error"]["error"] == "run_terminal", own


def test_v2_run_pause_resume(drv: httpx.Client, anon: httpx.Client) -> None:
    """v2-run-pause-resume: leg 1 ``:pause`` and ``:resume`` on a settled noop run are ``409 run_terminal``; leg 2 a
    running ``conformance-delay`` run pauses (``202 paused``, its bound id), a second pause is ``409
    run_state_conflict`` with root ``details.runStatus: paused``, it resumes (``202 running``), and the log
    has ``run.paused`` then ``run.resumed``; it is cancelled at the end."""
    done = noop_settled(drv)
    pause = drv.post(f"/runs/{enc(done)}:pause", json={})
    assert pause.status_code != 404, "blocked: pause is not mounted"
    assert pause.status_code == 409 and code_of(pause) == "run_terminal", pause.text
    resume = drv.post(f"/runs/{enc(done)}:resume", json={})
    assert resume.status_code == 409 and code_of(resume) == "run_terminal", resume.text

    fixture_listed(discovery(anon), DELAY)
    run_id = created(drv, {"workflowId": DELAY, "inputs": {"delayMs": 15000}})
    try:
        settled(drv, run_id, "running", *TERMINAL, timeout=5.0)
        assert status_of(drv, run_id) == "running", "blocked: conformance-delay did not run"
        paused = drv.post(f"/runs/{enc(run_id)}:pause", json={"reason": "conformance", "drainPolicy": "immediate"})
        assert paused.status_code == 202, paused.text
        assert paused.json()["runId"] == run_id and paused.json()["status"] == "paused"
        twice = drv.post(f"/runs/{enc(run_id)}:pause", json={})
        assert twice.status_code == 409 and code_of(twice) == "run_state_conflict", twice.text
        assert envelope(twice)["details"]["runStatus"] == "paused"
        resumed = drv.post(f"/runs/{enc(run_id)}:resume", json={"reason": "conformance"})
        assert resumed.status_code == 202 and resumed.json()["status"] == "running", resumed.text
        types = [e["type"] for e in poll(drv, run_id)["events"]]
        assert "run.paused" in types and "run.resumed" in types[types.index("run.paused") + 1 :], types
    finally:
        drv.post(f"/runs/{enc(run_id)}/cancel", json={"reason": "conformance cleanup"})


def test_v2_run_options_limits(drv: httpx.Client) -> None:
    """v2-run-options-limits: leg 1 101 tags, a 257-character tag and an unknown root key are each ``400
    validation_error``; leg 2 odd tags and nested metadata create (201) and read back exactly."""
    for extra in (
        {"tags": [f"t{i}" for i in range(101)]},
        {"tags": ["y" * 257]},
        {"conformanceUnknownRootKey": 1},
    ):
        answer = drv.post("/runs", json={"workflowId": NOOP, **extra})
        assert answer.status_code == 400 and code_of(answer) == "validation_error", (extra, answer.text)
        envelope(answer)
    tags = ["has space", "emoji 🚀", "slash/colon:pipe|", "UPPER-and_under", "x" * 256]
    metadata = {"nested": {"a": 1, "b": [1, "2", None, True]}, "s": "unicode ∞ ok", "n": 0}
    run_id = created(drv, {"workflowId": NOOP, "tags": tags, "metadata": metadata})
    snapshot = drv.get(f"/runs/{enc(run_id)}")
    assert snapshot.status_code == 200
    assert snapshot.json()["tags"] == tags and snapshot.json()["metadata"] == metadata


def test_v2_sse_last_event_id(host: Host, key: str, drv: httpx.Client) -> None:
    """v2-sse-last-event-id: a settled noop run's debug stream; leg 1 200, frames with integer rising ids, closed by
    the server; leg 2 ``Last-Event-ID: <first>`` resumes with exactly the later ids; leg 3 ``<last>`` is 200 with
    no frame, closed by the server; leg 4 a bogus mode names ``values`` in ``details.supported``, and ``values``
    with ``Last-Event-ID`` opens with a ``state.snapshot`` frame."""
    run_id = noop_settled(drv)
    path = f"/runs/{enc(run_id)}/events?streamMode=debug"
    full = subscribe(host, key, path)
    assert full.status == 200 and full.frames and full.closed_by == "server"
    ids = full.ids
    assert len(ids) == len(full.frames), "every frame carries an integer id"
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    resumed = subscribe(host, key, path, last_event_id=str(ids[0]))
    assert resumed.status == 200 and resumed.ids == [i for i in ids if i > ids[0]]
    tail = subscribe(host, key, path, last_event_id=str(ids[-1]))
    assert tail.status == 200 and tail.frames == [] and tail.closed_by == "server"

    bogus = drv.get(f"/runs/{enc(run_id)}/events?streamMode=bogus", headers={"Accept": "text/event-stream"})
    assert "values" in bogus.json()["details"]["supported"], "leg 4 is inapplicable without values"
    values = subscribe(host, key, f"/runs/{enc(run_id)}/events?streamMode=values", last_event_id=str(ids[0]))
    assert values.status == 200 and values.frames and values.frames[0].get("event") == "state.snapshot"


def _stream_answer(host: Host, key: str, drv: httpx.Client, path: str, last: str | None = None) -> tuple[int, Any]:
    """The suite's ``answer``: a stream request's status and, when not 200, its error code (read through the driver
    with ``Accept: text/event-stream``: the refusal is JSON even then)."""
    probe = subscribe(host, key, path, timeout=5.0, last_event_id=last)
    if probe.status == 200:
        return 200, None
    headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last} if last is not None else {})}
    return probe.status, code_of(drv.get(path, headers=headers))


def test_v2_sse_last_event_id_cursor(host: Host, key: str, drv: httpx.Client, tenant_b_key: str) -> None:
    """v2-sse-last-event-id-cursor: leg 1 ``Last-Event-ID`` past the log is 200, no frame, server-closed; leg 2
    ``abc`` is ``400 validation_error`` (or accepted: recorded, not failed); leg 3 an unknown own-tenant run,
    a forged foreign one and tenant B's existing run are each refused, the same with ``Last-Event-ID`` 0 (and
    1000) as without."""
    run_id = noop_settled(drv)
    path = f"/runs/{enc(run_id)}/events?streamMode=debug"
    full = subscribe(host, key, path)
    assert full.status == 200 and full.ids, "blocked: no numbered frames"
    past = subscribe(host, key, path, last_event_id=str(max(full.ids) + 1000))
    assert past.status == 200 and past.frames == [] and past.closed_by == "server"

    status, code = _stream_answer(host, key, drv, path, "abc")
    if status != 200:
        assert (status, code) == (400, "validation_error")

    unknown = f"{run_id.partition('/')[0]}/openwopconformanceunknown{base36(time.time_ns() // 1_000_000)}"
    with host.client(tenant_b_key) as b:
        b.headers.update({"Accept": "application/json", "OpenWOP-Version": "2.0"})
        theirs = noop_settled(b)
    assert theirs.partition("/")[0] != run_id.partition("/")[0], "blocked: tenant B is tenant A"
    for other, cursors in ((unknown, ["0"]), (FOREIGN_RUN_ID, ["0"]), (theirs, ["0", "1000"])):
        other_path = f"/runs/{enc(other)}/events?streamMode=debug"
        without = _stream_answer(host, key, drv, other_path)
        assert without[0] != 200, other
        for cursor in cursors:
            assert _stream_answer(host, key, drv, other_path, cursor) == without, (other, cursor)


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
