"""Durable webhooks at major 2, against real hosts and a real HTTPS receiver on loopback.

Register (a bound id, a made secret shown once, a supplied one never), the egress guard's
refusals, unregister, a v2 delivery (the official ``webhook-delivery`` schema, both header
families, a signature checked as the spec defines it), a v1 subscription's delivery left as
it was, and the advertised retry policy: widening gaps, then a dead letter read without its
body, headers or secret, and a 404 once the subscription is gone.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import orjson
import pytest
import trustme
from backends import Hosts, suite_host
from harness import Host, wait_until
from inproc import InProcessHost
from receiver import Received, Receiver, egress_to
from schemas import openwop_validator
from v2_wire import create, project, refused, wait_status

from tether.openwop.v2.webhooks import retry_schedule, webhooks_family
from tether.settings import Settings

V2 = {"OpenWOP-Version": "2.0"}
BOUND = re.compile(r"^default/[A-Za-z0-9._~-]{16,128}$")
#: the suite's own probe list (v2-webhook-egress-refusal), each made unique by a marker in its path
EGRESS_PROBES = [
    "http://webhook-egress-probe.example.com/hook",
    "https://127.0.0.1/openwop-egress-probe",
    "https://[::1]/openwop-egress-probe",
    "https://localhost/openwop-egress-probe",
    "https://10.255.255.1/openwop-egress-probe",
    "https://192.168.255.1/openwop-egress-probe",
    "https://169.254.169.254/latest/meta-data/",
    "https://[fd00::1]/openwop-egress-probe",
    "https://[::ffff:7f00:1]/openwop-egress-probe",
    "https://[::ffff:a9fe:a9fe]/latest/meta-data/",
    "https://[::ffff:a00:1]/openwop-egress-probe",
]


class Answers:
    """The receiver's script: paths under ``/fail/`` answer 500, others 204; each request's arrival time kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.arrivals: dict[str, list[float]] = {}

    def __call__(self, received: Received) -> tuple[int, dict[str, str]]:
        with self._lock:
            self.arrivals.setdefault(received.path, []).append(time.monotonic())
        return (500 if received.path.startswith("/fail/") else 204), {}

    def at(self, path: str) -> list[float]:
        with self._lock:
            return list(self.arrivals.get(path, []))


@pytest.fixture(scope="module")
def answers() -> Answers:
    return Answers()


@pytest.fixture(scope="module")
def rx(tmp_path_factory: pytest.TempPathFactory, answers: Answers) -> Iterator[Receiver]:
    receiver = Receiver(trustme.CA(), tmp_path_factory.mktemp("receiver"))
    receiver.script = answers
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str, rx: Receiver) -> Host:
    """The module's host, allowed to reach the loopback receiver (``fresh_host``: one of the test's own)."""
    return suite_host(request, *egress_to(rx))


def _path(kind: str) -> str:
    return f"/{kind}/{uuid.uuid4().hex}"


def _requests(rx: Receiver, path: str) -> list[Received]:
    return [r for r in list(rx.requests) if r.path == path]


def _register(http: httpx.Client, url: str, events: list[str], **extra: Any) -> dict[str, Any]:
    answer = http.post("/webhooks", json={"url": url, "events": events, **extra})
    assert answer.status_code == 201, answer.text
    assert answer.headers["openwop-version"] == "2.0"
    body: dict[str, Any] = answer.json()
    return body


def _signed(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, "{timestamp}.{rawBody}")>``, written from webhooks.md, not Tether's code."""
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


# the family the v2 discovery document advertises ----------------------------------------------------


def test_the_advertised_family_is_the_schemas_and_the_policy_the_outbox_applies() -> None:
    family = webhooks_family(Settings())
    openwop_validator("v2/capabilities#/properties/webhooks").validate(family)
    assert (family["witness"], family["signatureAlgorithms"]) == ("witnessable-gated", ["v1"])
    assert family["retryPolicy"] == {"maxAttempts": 4, "backoff": "exponential"}
    assert family["deadLetter"] == {"retentionDays": 30, "maxPageSize": 100}
    assert retry_schedule(Settings()).delays == (1.0, 2.0, 4.0), "4 attempts: 3 retries, each twice the last"
    assert retry_schedule(Settings(webhook_max_attempts=6, webhook_first_retry=5.0)).delays == (5, 10, 20, 40, 80)
    assert webhooks_family(Settings(webhook_max_attempts=6))["retryPolicy"]["maxAttempts"] == 6
    assert webhooks_family(Settings(task_retention=0))["deadLetter"]["retentionDays"] == 36500, "kept forever"
    assert "deadLetter" not in webhooks_family(Settings(task_retention=3600)), "under a day cannot be advertised"


# register and unregister ----------------------------------------------------------------------------


def test_register_answers_a_bound_id_and_shows_a_made_secret_once(http: httpx.Client, host: Host, rx: Receiver) -> None:
    made = _register(http, rx.url(_path("ok")), ["run.completed"])
    assert BOUND.fullmatch(made["webhookId"]) and made["webhookId"].startswith("default/wh_"), made
    assert re.fullmatch(r"[0-9a-f]{64}", made["secret"]), "a secret made here, shown in this answer"
    assert "signatureAlgorithms" not in made

    supplied = "a supplied secret of thirty-two chars or more " + uuid.uuid4().hex
    chosen = http.post(
        "/webhooks",
        json={"url": rx.url(_path("ok")), "events": ["run.started"], "secret": supplied, "signatureAlgorithms": ["v1"]},
    )
    assert chosen.status_code == 201, chosen.text
    assert "secret" not in chosen.json() and supplied not in chosen.text, "a supplied secret is never echoed"
    assert chosen.json()["signatureAlgorithms"] == ["v1"]
    assert BOUND.fullmatch(chosen.json()["webhookId"]) and chosen.json()["webhookId"] != made["webhookId"]
    stored = host.stored_bytes()
    assert made["secret"].encode() not in stored and supplied.encode() not in stored, "secrets are sealed at rest"
    assert supplied not in host.log() and made["secret"] not in host.log()
    for hook in (made, chosen.json()):
        assert http.delete(f"/webhooks/{project(hook['webhookId'])}").status_code == 204


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"events": ["run.completed"]}, "url"),
        ({"url": "https://hooks.example.com/{marker}"}, "events"),
        ({"url": "https://hooks.example.com/{marker}", "events": []}, "events"),
        ({"url": "https://hooks.example.com/{marker}", "events": ["agent.toolCalled"]}, "events[0]"),
        ({"url": "https://hooks.example.com/{marker}", "events": ["run.completed", "run.complete"]}, "events[1]"),
        ({"url": "https://hooks.example.com/{marker}", "events": ["run.completed"], "secret": "short"}, "secret"),
        ({"url": "https://hooks.example.com/{marker}", "events": ["run.completed"], "tenantId": "default"}, "tenantId"),
        (
            {"url": "https://hooks.example.com/{marker}", "events": ["run.completed"], "signatureAlgorithms": []},
            "signatureAlgorithms",
        ),
        (
            {
                "url": "https://hooks.example.com/{marker}",
                "events": ["run.completed"],
                "signatureAlgorithms": ["v1", "standard-webhooks-1"],
            },
            "signatureAlgorithms",
        ),
    ],
)
def test_a_body_outside_the_closed_shape_is_400_and_stores_nothing(
    http: httpx.Client, host: Host, body: dict[str, Any], field: str
) -> None:
    marker = uuid.uuid4().hex
    sent = orjson.loads(orjson.dumps(body).replace(b"{marker}", marker.encode()))
    answer = refused(http.post("/webhooks", json=sent), 400, "validation_error")
    assert field in answer["message"], answer
    assert marker.encode() not in host.stored_bytes()


def test_a_malformed_body_is_the_v2_envelope(http: httpx.Client) -> None:
    answer = http.post("/webhooks", content=b"{", headers={"Content-Type": "application/json"})
    refused(answer, 400, "validation_error")


def test_every_url_the_egress_guard_refuses_is_400_webhook_url_rejected_and_stores_nothing(
    start_module_host: Hosts[InProcessHost],
) -> None:
    host = start_module_host.shared()  # the default egress policy: no loopback allowed, unlike the module's host
    assert host.dev_key
    http = host.http(host.dev_key)
    marker = uuid.uuid4().hex
    for probe in EGRESS_PROBES:
        url = f"{probe}?probe={marker}"
        answer = http.post("/webhooks", json={"url": url, "events": ["run.completed"]}, headers=V2)
        assert refused(answer, 400, "webhook_url_rejected")["details"]["field"] == "url", answer.text
    assert marker.encode() not in host.stored_bytes()


def test_an_unresolvable_public_name_is_taken_at_registration(http: httpx.Client) -> None:
    """It is resolved and checked before each delivery instead; a name that cannot resolve today may tomorrow."""
    hook = _register(http, "https://subscriber.invalid/hook", ["run.completed"])
    read = http.get(f"/webhooks/{project(hook['webhookId'])}/dead-letters")
    assert read.status_code == 200 and read.json() == {"deliveries": []}, read.text
    assert http.delete(f"/webhooks/{project(hook['webhookId'])}").status_code == 204


def test_unregister_is_204_then_404_and_another_tenants_id_is_403_before_any_lookup(
    http: httpx.Client, host: Host, other_tenant_key: str, rx: Receiver
) -> None:
    hook = _register(http, rx.url(_path("ok")), ["run.completed"])
    theirs = host.http(other_tenant_key).post(
        "/webhooks", json={"url": rx.url(_path("ok")), "events": ["run.completed"]}, headers=V2
    )
    assert theirs.status_code == 201 and theirs.json()["webhookId"].startswith("acme/wh_"), theirs.text
    their_id = theirs.json()["webhookId"]

    refused(http.delete(f"/webhooks/{project(their_id)}"), 403, "id_tenant_mismatch")
    refused(http.delete(f"/webhooks/{project('acme/wh_' + uuid.uuid4().hex)}"), 403, "id_tenant_mismatch")
    refused(http.delete(f"/webhooks/{their_id.split('/')[1]}"), 404, "not_found")  # a bare id is the caller's own
    refused(http.get(f"/webhooks/{project(their_id)}/dead-letters"), 403, "id_tenant_mismatch")

    assert http.delete(f"/webhooks/{hook['webhookId'].replace('/', '%2F')}").status_code == 204, "%2F reads as ~2F"
    refused(http.delete(f"/webhooks/{project(hook['webhookId'])}"), 404, "not_found")
    refused(http.delete(f"/webhooks/{project('default/wh_' + uuid.uuid4().hex)}"), 404, "not_found")
    assert host.http(other_tenant_key).delete(f"/webhooks/{project(their_id)}", headers=V2).status_code == 204


# deliveries -----------------------------------------------------------------------------------------


def test_a_v2_delivery_is_the_v2_envelope_signed_in_both_header_families(http: httpx.Client, rx: Receiver) -> None:
    path = _path("ok")
    hook = _register(http, rx.url(path), ["run.started", "run.completed"])
    try:
        run = create(http)
        wait_until(lambda: len(_requests(rx, path)) >= 2, what="two deliveries")
    finally:
        http.delete(f"/webhooks/{project(hook['webhookId'])}")
    deliveries = _requests(rx, path)
    assert [orjson.loads(d.body)["event"]["type"] for d in deliveries] == ["run.started", "run.completed"]
    for delivery in deliveries:
        body = orjson.loads(delivery.body)
        openwop_validator("v2/webhook-delivery").validate(body)
        assert body["runId"] == body["event"]["runId"] == run["runId"], "the bound id the client was given"
        assert "workspaceId" not in body, "Tether has no workspaces: never the tenant in its place"
        headers = delivery.headers
        for family in ("openwop", "x-openwop"):
            assert headers[f"{family}-webhook-id"] == hook["webhookId"]
            assert headers[f"{family}-event-type"] == body["event"]["type"]
            assert headers[f"{family}-signature-algorithm"] == "v1"
            timestamp = headers[f"{family}-timestamp"]
            assert abs(int(timestamp) - time.time()) < 300
            assert headers[f"{family}-signature"] == _signed(hook["secret"], timestamp, delivery.body)
            assert headers[f"{family}-signature"] != _signed("another secret " * 3, timestamp, delivery.body)
    started = orjson.loads(deliveries[0].body)["event"]["payload"]
    openwop_validator("v2/run-event-payloads#/$defs/runStarted").validate(started)


def test_a_v1_subscription_is_delivered_as_it_always_was(
    http: httpx.Client, host: Host, key: str, rx: Receiver
) -> None:
    v1_path, v2_path = _path("ok"), _path("ok")
    with host.client(key) as v1:
        made = v1.post("/v1/webhooks", json={"url": rx.url(v1_path), "events": ["run.completed"]})
        assert made.status_code == 201, made.text
        v1_hook = made.json()
        v2_hook = _register(http, rx.url(v2_path), ["run.completed"])
        try:
            run = create(http)
            wait_until(lambda: _requests(rx, v1_path) and _requests(rx, v2_path), what="both deliveries")
        finally:
            assert v1.delete(f"/v1/webhooks/{v1_hook['webhookId']}").status_code == 204
            http.delete(f"/webhooks/{project(v2_hook['webhookId'])}")
    [old] = _requests(rx, v1_path)
    body = orjson.loads(old.body)
    assert body["runId"] == run["runId"].split("/")[1] and body["workspaceId"] == "default", "v1: bare ids"
    openwop_validator("run-event").validate(body["event"])
    assert isinstance(body["event"]["engineVersion"], str), "the v1 event, not the v2 one"
    assert old.headers["x-openwop-webhook-id"] == v1_hook["webhookId"] == v1_hook["subscriptionId"]
    for absent in ("openwop-webhook-id", "openwop-event-type", "openwop-signature-algorithm"):
        assert absent not in old.headers, "v1 sends the headers it always sent, no more"
    assert old.headers["openwop-signature"] == _signed(v1_hook["secret"], old.headers["openwop-timestamp"], old.body)
    [new] = _requests(rx, v2_path)
    assert orjson.loads(new.body)["event"]["eventId"] == body["event"]["eventId"], "one event, two renderings"


# durability -----------------------------------------------------------------------------------------


@pytest.mark.fresh_host  # times gaps to one receiver: nothing else of the module may fail on it meanwhile
def test_retries_widen_as_advertised_then_the_dead_letter_is_read_and_gone_with_its_subscription(
    http: httpx.Client, host: Host, rx: Receiver, answers: Answers
) -> None:
    path = _path("fail")
    # tags narrow a subscription to the runs that carry one: one timed delivery, two paged ones
    hook = _register(http, rx.url(path), ["run.completed"], tags=["timed"])
    letters = f"/webhooks/{project(hook['webhookId'])}/dead-letters"
    # a second subscription whose every delivery dies (its name never resolves): dead letters to page through
    paged = _register(http, "https://subscriber.invalid/hook", ["run.completed"], tags=["paged"])
    paged_letters = f"/webhooks/{project(paged['webhookId'])}/dead-letters"
    timed = create(http, tags=["timed", "paged"])
    wait_status(http, timed["runId"], "completed")  # its deliveries first: the other's dead letter is the newest
    other = create(http, tags=["paged"])
    wait_status(http, other["runId"], "completed")

    def dead(url: str, count: int) -> list[dict[str, Any]] | None:
        page = http.get(url)
        assert page.status_code == 200, page.text
        found: list[dict[str, Any]] = page.json()["deliveries"]
        return found if len(found) >= count else None

    [letter] = wait_until(lambda: dead(letters, 1), timeout=30, what="the delivery dead-lettered")
    arrivals = answers.at(path)
    assert len(arrivals) == 4, "maxAttempts attempts, none after the last (it is dead, no longer due)"
    gaps = [later - earlier for earlier, later in zip(arrivals, arrivals[1:], strict=False)]
    assert 0.8 < gaps[0] < 3.0, gaps
    assert gaps[1] >= 1.25 * gaps[0] and gaps[2] >= 1.25 * gaps[1], f"exponential backoff widens: {gaps}"

    page = http.get(letters)
    openwop_validator("v2/webhook-dead-letter-page").validate(page.json())
    assert letter["runId"] == timed["runId"], "the bound id the run was created with"
    assert BOUND.fullmatch(letter["deliveryId"]) and letter["webhookId"] == hook["webhookId"]
    assert (letter["eventType"], letter["attempts"], letter["reason"], letter["lastStatus"]) == (
        "run.completed",
        4,
        "retries_exhausted",
        500,
    )
    died, expires = (datetime.fromisoformat(letter[k].replace("Z", "+00:00")) for k in ("deadLetteredAt", "expiresAt"))
    assert (expires - died).total_seconds() == 30 * 86400, "expiresAt - deadLetteredAt = deadLetter.retentionDays"
    assert not {"body", "headers", "secret"} & set(letter)
    assert hook["secret"] not in page.text and "sha256=" not in page.text

    # paging: limit is clamped, a cursor pages on and is good for its own subscription only
    both = wait_until(lambda: dead(paged_letters, 2), timeout=30, what="the unresolvable subscription's dead letters")
    assert [d["runId"] for d in both] == [other["runId"], timed["runId"]], "newest first"
    assert http.get(paged_letters, params={"limit": 100000}).status_code == 200
    refused(http.get(paged_letters, params={"limit": 0}), 400, "validation_error")
    one = http.get(paged_letters, params={"limit": 1}).json()
    assert len(one["deliveries"]) == 1 and "lastStatus" not in one["deliveries"][0], "no answer: no status"
    rest = http.get(paged_letters, params={"limit": 1, "cursor": one["nextCursor"]}).json()
    assert rest["deliveries"][0]["deliveryId"] < one["deliveries"][0]["deliveryId"]
    refused(http.get(letters, params={"cursor": one["nextCursor"]}), 400, "validation_error")
    refused(http.get(paged_letters, params={"cursor": "bm90LW1pbmVk"}), 400, "validation_error")

    # after unregister the read is a 404 exactly like an id never minted
    assert http.delete(f"/webhooks/{project(hook['webhookId'])}").status_code == 204
    gone = refused(http.get(letters), 404, "not_found")
    never = refused(
        http.get(f"/webhooks/{project('default/never-' + uuid.uuid4().hex)}/dead-letters"), 404, "not_found"
    )
    assert gone["error"] == never["error"]
    assert http.delete(f"/webhooks/{project(paged['webhookId'])}").status_code == 204


def test_one_subscribers_failures_neither_hold_back_its_neighbour_nor_stretch_its_retries(
    http: httpx.Client, rx: Receiver, answers: Answers
) -> None:
    """Two subscriptions on one receiver host: one's endpoint answers 500 to everything (the host is up and says
    so for that path only), the other's 204. The healthy one is not made to wait behind the failing one's pause,
    and a second failing subscription keeps the advertised 1 s, 2 s, 4 s retries instead of the first one's
    grown pause (the v2 suite registers its subscriptions on one receiver, one after another)."""
    failing, healthy = _path("fail"), _path("ok")
    for path, tag in ((failing, "neighbour-a"), (healthy, "neighbour-b")):
        _register(http, rx.url(path), ["run.completed"], tags=[tag])
    for _ in range(3):  # three failing deliveries in a row: a pause of the whole host would have grown to 2 s
        wait_status(http, create(http, tags=["neighbour-a"])["runId"], "completed")
    wait_until(lambda: len(answers.at(failing)) >= 6, timeout=30, what="the failing subscriber's attempts")
    started = time.monotonic()
    wait_status(http, create(http, tags=["neighbour-b"])["runId"], "completed")
    wait_until(lambda: answers.at(healthy) or None, timeout=10, what="the healthy subscriber's delivery")
    assert answers.at(healthy)[0] - started < 1.5, "the healthy subscriber did not wait out its neighbour's pause"

    second = _path("fail")
    _register(http, rx.url(second), ["run.completed"], tags=["neighbour-c"])
    wait_status(http, create(http, tags=["neighbour-c"])["runId"], "completed")
    wait_until(lambda: len(answers.at(second)) >= 3 or None, timeout=30, what="three attempts of the second")
    arrivals = answers.at(second)
    gaps = [later - earlier for earlier, later in zip(arrivals, arrivals[1:], strict=False)]
    assert 0.8 < gaps[0] < 2.0 and 1.6 < gaps[1] < 3.5, f"the advertised ladder, not a neighbour's pause: {gaps}"
