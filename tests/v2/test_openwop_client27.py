"""The published ``openwop-client==2.7.0`` drives a real host at major 2, unmodified and with its defaults.

The client runs in an environment of its own (``owc27/driver.py``; the main environment
pins 1.8.0, the same package) and speaks only v2: the bare origin, ``OpenWOP-Version:
2.0`` on every request, bound ids projected into one path segment. Each test asserts on
what the client itself returned or raised (its dataclasses, its ``WopError`` with the
parsed envelope), on both stores. Where the client cannot reach something a user needs
(the interrupt token: its ``RunSnapshot`` has no ``extensions``), the test reads it over
plain HTTP and hands it to the client, as a user would.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import trustme
from backends import suite_host
from harness import Host, wait_until
from owc27_driver import ClientRefused, Owc27
from prometheus_client.parser import text_string_to_metric_families
from receiver import Received, Receiver, egress_to
from schemas import openwop_validator
from v2_wire import project
from workflow_docs import node, workflow_doc

#: a tenant-bound id as v2 writes it in bodies (ids.schema.json's grammar, this host's tenant)
BOUND_RUN = re.compile(r"^default/run_[0-9a-f]{32}$")
BOUND = re.compile(r"^default/[A-Za-z0-9._~-]{16,128}$")
#: a delay as long as ``inputs.delayMs``, then a short one: a run that is live long enough to control
DELAYED = workflow_doc(
    "delayed",
    [
        node("first", "core.delay", inputs={"delayMs": {"type": "variable", "variableName": "delayMs"}}),
        node("second", "core.delay", config={"delayMs": 200}),
    ],
    [{"id": "e1", "sourceNodeId": "first", "targetNodeId": "second"}],
    [{"name": "delayMs", "type": "number", "defaultValue": 15000}],
)
#: the ladder at its shortest (0.1, 0.2, 0.4 s): a delivery to a receiver that always fails is then spent as fast
#: as the outbox's own pause for a failing destination allows (0.5, 1, 2 s), about 3.5 s instead of 7
FAST_RETRIES = ("--webhook-first-retry", "0.1")
#: ``--webhook-max-attempts``' default, as ``webhooks.retryPolicy`` advertises it
MAX_ATTEMPTS = 4


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def rx(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    """A subscriber that takes every delivery (204)."""
    receiver = Receiver(ca, tmp_path_factory.mktemp("receiver"))
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def broken(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    """A subscriber that fails every delivery (500), on a port of its own: the outbox's pause for a failing
    destination holds its deliveries only, never ``rx``'s."""
    receiver = Receiver(ca, tmp_path_factory.mktemp("broken"))
    receiver.script = [500]
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def workflows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("client27-workflows")
    (folder / "delayed.json").write_text(json.dumps(DELAYED))
    return folder


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str, workflows: Path, rx: Receiver) -> Host:
    return suite_host(request, "--workflows", str(workflows), *egress_to(rx), *FAST_RETRIES)


@pytest.fixture(scope="module")
def driver() -> Iterator[Owc27]:
    """One openwop-client 2.7.0 process for the module (each test connects it to its host)."""
    with Owc27() as owc:
        yield owc


@pytest.fixture
def owc(driver: Owc27, host: Host, key: str) -> Owc27:
    made = driver.connect(host.url, key)
    assert made == {"protocolVersion": "2.0", "clientVersion": "2.46.32"}, "the client's defaults"
    return driver


# helpers: the client's own calls ----------------------------------------------------------------------------


def create(owc: Owc27, workflow: str = "echo", **body: Any) -> dict[str, Any]:
    """``runs_create``'s answer (``inputs`` a prompt unless given: ``echo`` and ``approval-gated`` need one)."""
    created: dict[str, Any] = owc.call("runs_create", body={"workflowId": workflow, "inputs": {"prompt": "hi"}, **body})
    return created


def status_of(owc: Owc27, run_id: str) -> str:
    status: str = owc.call("runs_get", run_id)["status"]
    return status


def wait_for(owc: Owc27, run_id: str, *statuses: str, timeout: float = 20.0) -> dict[str, Any]:
    """The run's snapshot (as the client parsed it) once its status is one of ``statuses``."""

    def reached() -> dict[str, Any] | None:
        snapshot: dict[str, Any] = owc.call("runs_get", run_id)
        return snapshot if snapshot["status"] in statuses else None

    found: dict[str, Any] = wait_until(reached, timeout=timeout, what=f"run {run_id} to be one of {statuses}")
    return found


def running_first(owc: Owc27, delay_ms: int) -> str:
    """A ``delayed`` run whose first delay is sleeping; its bound id."""
    run_id: str = create(owc, "delayed", inputs={"delayMs": delay_ms})["runId"]

    def sleeping() -> bool:
        states = owc.call("runs_get", run_id)["nodeStates"] or {}
        return bool(states.get("first", {}).get("status") == "running")

    wait_until(sleeping, what="the first delay to run")
    return run_id


def poll_all(owc: Owc27, run_id: str) -> list[dict[str, Any]]:
    """Every event of a run through the client's long poll, following ``lastSequence`` to the terminal one."""
    events: list[dict[str, Any]] = []
    after = None
    for _ in range(100):
        page = owc.call("runs_poll_events", run_id, kwargs={"after_sequence": after, "timeout_seconds": 5})
        events += page["events"]
        after = events[-1]["sequence"] if events else after  # a page may stop short of lastSequence
        if page["isTerminal"]:
            return events
    raise AssertionError(f"run {run_id} never ended: {[e['type'] for e in events]}")


def refusal(caught: pytest.ExceptionInfo[ClientRefused], status: int, code: str) -> dict[str, Any]:
    """What the client raised: a ``WopError`` of ``status`` whose envelope (the official v2 shape) names ``code``."""
    error = caught.value
    assert (error.kind, error.status) == ("WopError", status), error
    assert error.raw is not None
    openwop_validator("v2/error-envelope").validate(json.loads(error.raw))
    assert error.envelope is not None and error.envelope["error"] == code, error
    return error.envelope


def token_of(http: httpx.Client, run_id: str) -> str:
    """The pending interrupt's token, from the v2 snapshot's extension (the client's ``RunSnapshot`` drops it)."""
    snapshot = http.get(f"/runs/{project(run_id)}")
    assert snapshot.status_code == 200, snapshot.text
    token: str = snapshot.json()["extensions"]["tether.interrupt"]["interruptToken"]
    return token


# discovery ---------------------------------------------------------------------------------------------------


def test_discovery_parses_the_v2_root_with_every_family_tether_serves(owc: Owc27, http: httpx.Client) -> None:
    caps = owc.call("discovery_capabilities")
    assert caps["protocolVersions"] == ["1.0", "2.0"] and caps["preferredVersion"] == "1.0"
    assert set(caps["families"]) >= {"interrupt", "idempotency", "eventLog", "runList", "limits", "webhooks"}
    assert caps["families"]["interrupt"]["facets"] == {"tokenAlgs": ["hs256"]}
    assert caps["families"]["webhooks"]["facets"]["retryPolicy"] == {
        "maxAttempts": MAX_ATTEMPTS,
        "backoff": "exponential",
    }
    assert caps["families"]["limits"]["status"] == "stable" and caps["families"]["limits"]["until"] is None
    assert (caps["engineVersion"], caps["eventLogSchemaVersion"]) == (1, 3), "integers, as the client reads them"
    openwop_validator("v2/capabilities").validate(caps["raw"])
    assert "supportedTransports" not in caps["raw"] and "capabilities" not in caps["raw"], "no v1 keys on the v2 root"
    assert caps["raw"] == http.get("/.well-known/openwop").json(), "the document the client got is the v2 root"
    assert {"/runs", "/runs:bulk-cancel", "/webhooks"} <= set(owc.call("discovery_openapi")["paths"])
    assert owc.call("workflows_get", "delayed")["id"] == "delayed"


# runs: create, get, list ---------------------------------------------------------------------------------------


def test_create_get_and_list_with_bound_ids(owc: Owc27, host: Host) -> None:
    created = create(owc, inputs={"prompt": "hello"}, tags=["client27"], metadata={"from": "openwop-client"})
    run_id = created["runId"]
    assert BOUND_RUN.fullmatch(run_id), created
    assert created["status"] in ("pending", "running")
    assert created["eventsUrl"] == f"{host.url}/runs/{project(run_id)}/events"
    assert created["statusUrl"] == f"{host.url}/runs/{project(run_id)}"

    done = wait_for(owc, run_id, "completed")
    assert done["runId"] == run_id and done["workflowId"] == "echo"
    assert done["owner"]["tenant"] == "default"
    subject = done["owner"]["subject"]
    assert subject["tenant"] == "default" and subject["issuer"] and subject["subjectId"] and subject["lane"]
    assert (done["engineVersion"], done["eventLogSchemaVersion"]) == (1, 3)
    assert done["variables"]["payload"] == "hello"
    assert done["tags"] == ["client27"] and done["metadata"] == {"from": "openwop-client"}
    assert done["nodeStates"]["echo"]["status"] == "completed"
    assert done["startedAt"] and done["completedAt"]

    newer = create(owc)["runId"]
    wait_for(owc, newer, "completed")
    first = owc.call("runs_list", kwargs={"workflow_id": "echo", "status": "completed", "limit": 1})
    assert [r["runId"] for r in first["runs"]] == [newer], "newest first"
    assert first["next_cursor"]
    second = owc.call("runs_list", kwargs={"workflow_id": "echo", "limit": 1, "cursor": first["next_cursor"]})
    assert [r["runId"] for r in second["runs"]] == [run_id], "the cursor pages on"
    listed = owc.call("runs_list", kwargs={"limit": 100})["runs"]
    assert all(BOUND_RUN.fullmatch(r["runId"]) for r in listed)
    with pytest.raises(ClientRefused) as bad_cursor:
        owc.call("runs_list", kwargs={"cursor": "not-a-cursor-of-ours"})
    refusal(bad_cursor, 400, "validation_error")


def test_a_refused_create_is_the_v2_envelope_and_starts_nothing(owc: Owc27) -> None:
    before = owc.call("runs_list", kwargs={"limit": 100})["runs"]
    with pytest.raises(ClientRefused) as unknown:
        create(owc, "no-such-workflow")
    assert refusal(unknown, 400, "validation_error")["details"] == {"workflowId": "no-such-workflow"}
    with pytest.raises(ClientRefused) as closed:
        create(owc, configurable={"version": 1, "run": {"recursionLimit": 5}})
    assert "configurable" in refusal(closed, 400, "validation_error")["message"]
    with pytest.raises(ClientRefused) as bad_key:
        owc.call("runs_create", body={"workflowId": "echo"}, kwargs={"idempotency_key": "too-short"})
    refusal(bad_key, 400, "idempotency_key_invalid")
    assert owc.call("runs_list", kwargs={"limit": 100})["runs"] == before


def test_an_idempotency_key_replays_the_first_answer(owc: Owc27) -> None:
    key = uuid.uuid4().hex
    body = {"workflowId": "echo", "inputs": {"prompt": "once"}}
    first = owc.call("runs_create", body=body, kwargs={"idempotency_key": key})
    again = owc.call("runs_create", body=body, kwargs={"idempotency_key": key})
    assert again == first, "one run, the same answer"
    listed = owc.call("runs_list", kwargs={"workflow_id": "echo", "limit": 100})["runs"]
    assert [r["runId"] for r in listed].count(first["runId"]) == 1
    with pytest.raises(ClientRefused) as other:
        owc.call("runs_create", body={**body, "inputs": {"prompt": "twice"}}, kwargs={"idempotency_key": key})
    refusal(other, 409, "idempotency_key_mismatch")


# events: poll and SSE ------------------------------------------------------------------------------------------


def test_poll_follows_last_sequence_to_the_terminal_event(owc: Owc27) -> None:
    run_id = create(owc, inputs={"prompt": "polled"})["runId"]
    events = poll_all(owc, run_id)
    assert [e["sequence"] for e in events] == list(range(len(events))), "from 0, no gap, no repeat"
    assert [e["type"] for e in events] == ["run.started", "node.started", "node.completed", "run.completed"]
    assert all(e["runId"] == run_id and e["schemaVersion"] == 1 and e["engineVersion"] == 1 for e in events)
    assert events[-1]["payload"]["outputs"] == {"payload": "polled"}
    assert events[1]["nodeId"] == "echo"
    last = events[-1]["sequence"]
    past = owc.call("runs_poll_events", run_id, kwargs={"after_sequence": last, "timeout_seconds": 1})
    assert (past["events"], past["lastSequence"], past["status"], past["isTerminal"]) == ([], last, "completed", True)
    middle = owc.call("runs_poll_events", run_id, kwargs={"after_sequence": 1})
    assert [e["sequence"] for e in middle["events"]] == [2, 3], "afterSequence is exclusive"
    for event in events:
        openwop_validator("v2/run-event").validate({k: v for k, v in event.items() if v is not None})


def open_streams(host: Host) -> float:
    """How many REST event streams the host holds open now (its own gauge)."""
    metrics = host.http().get("/metrics")
    assert metrics.status_code == 200, metrics.text
    for family in text_string_to_metric_families(metrics.text):
        for sample in family.samples:
            if sample.name == "tether_open_streams" and sample.labels == {"surface": "rest"}:
                return float(sample.value)
    return 0.0


def test_sse_leaves_a_live_run_then_resumes_after_last_event_id_and_follows_it_live(
    owc: Owc27, host: Host, http: httpx.Client
) -> None:
    run_id = create(owc, "approval-gated")["runId"]
    wait_for(owc, run_id, "waiting-approval")
    idle = open_streams(host)
    head = owc.call("runs_events", run_id, kwargs={"stream_mode": "debug"}, limit=2)
    assert [e["type"] for e in head] == ["run.started", "node.started"] and head[0]["sequence"] == 0
    wait_until(lambda: open_streams(host) == idle, what="the stream the client left to close")

    with ThreadPoolExecutor(1) as pool:
        resumed = pool.submit(
            owc.call, "runs_events", run_id, kwargs={"stream_mode": "debug", "last_event_id": str(head[-1]["sequence"])}
        )
        wait_until(lambda: open_streams(host) == idle + 1, what="the client's resumed stream to be open")
        assert status_of_http(http, run_id) == "waiting-approval", "the stream is open on a live run"
        answer = http.post(f"/runs/{project(run_id)}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
        assert answer.status_code == 200, answer.text
        tail: list[dict[str, Any]] = resumed.result(timeout=30)
    assert tail[0]["sequence"] == head[-1]["sequence"] + 1, "Last-Event-ID is exclusive"
    types = [e["type"] for e in tail]
    assert "approval.requested" in types and types.index("approval.received") < types.index("run.completed")
    assert types[-1] == "run.completed", "the stream followed the run live and ended with it"
    streamed = head + tail
    assert [e["sequence"] for e in streamed] == list(range(len(streamed))), "nothing lost, nothing twice"
    assert streamed == poll_all(owc, run_id), "the stream and the poll read one log"
    updates = owc.call("runs_events", run_id)  # the client's default, no streamMode: updates
    assert updates == [e for e in streamed if e["type"] not in ("node.started", "node.resumed")]


def status_of_http(http: httpx.Client, run_id: str) -> str:
    status: str = http.get(f"/runs/{project(run_id)}").json()["status"]
    return status


# interrupts --------------------------------------------------------------------------------------------------


def test_an_approval_is_resolved_by_run(owc: Owc27) -> None:
    run_id = create(owc, "approval-gated", inputs={"prompt": "draft"})["runId"]
    waiting = wait_for(owc, run_id, "waiting-approval")
    assert waiting["currentNodeId"] == "gate"
    resolved = owc.call("interrupts_resolve_by_run", run_id, "gate", body={"resumeValue": {"action": "accept"}})
    assert resolved["runId"] == run_id and resolved["nodeId"] == "gate"
    assert resolved["status"] in ("running", "completed")
    done = wait_for(owc, run_id, "completed")
    assert done["nodeStates"]["publish"]["status"] == "completed"
    assert done["nodeStates"]["on-reject"]["status"] == "skipped"
    events = poll_all(owc, run_id)
    types = [e["type"] for e in events]
    assert types.index("interrupt.requested") < types.index("interrupt.resolved") < types.index("run.completed")
    assert types.index("approval.requested") < types.index("approval.received") < types.index("run.completed")
    suspended = next(e for e in events if e["type"] == "node.suspended")
    assert suspended["nodeId"] == "gate" and BOUND.fullmatch(suspended["payload"]["interruptId"]), "a bound interruptId"
    with pytest.raises(ClientRefused) as again:
        owc.call("interrupts_resolve_by_run", run_id, "gate", body={"resumeValue": {"action": "reject"}})
    refusal(again, 409, "interrupt_already_resolved")


def test_an_approval_is_inspected_and_resolved_by_token(owc: Owc27, http: httpx.Client) -> None:
    run_id = create(owc, "approval-gated", inputs={"prompt": "draft"})["runId"]
    wait_for(owc, run_id, "waiting-approval")
    token = token_of(http, run_id)
    assert token.startswith("ow2.hs256.") and token.count(".") == 4
    inspected = owc.call("interrupts_inspect_by_token", token)
    assert inspected["kind"] == "approval" and inspected["key"]
    assert inspected["data"]["title"] == "Approve the draft"

    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    with pytest.raises(ClientRefused) as bad:
        owc.call("interrupts_resolve_by_token", forged, body={"resumeValue": {"action": "accept"}})
    refusal(bad, 401, "interrupt_token_invalid")
    assert status_of(owc, run_id) == "waiting-approval", "a forged token resolved nothing"

    resolved = owc.call("interrupts_resolve_by_token", token, body={"resumeValue": {"action": "reject"}})
    assert resolved["runId"] == run_id and resolved["nodeId"] == "gate"
    with pytest.raises(ClientRefused) as used:
        owc.call("interrupts_resolve_by_token", token, body={"resumeValue": {"action": "accept"}})
    refusal(used, 409, "interrupt_already_resolved")
    with pytest.raises(ClientRefused) as gone:
        owc.call("interrupts_inspect_by_token", token)
    refusal(gone, 409, "interrupt_already_resolved")
    done = wait_for(owc, run_id, "completed")
    assert done["nodeStates"]["on-reject"]["status"] == "completed"
    assert done["nodeStates"]["publish"]["status"] == "skipped"


# run control -------------------------------------------------------------------------------------------------


def test_cancel_then_a_terminal_run_is_409_run_terminal(owc: Owc27) -> None:
    run_id = running_first(owc, 15000)
    cancelled = owc.call("runs_cancel", run_id, body={"reason": "openwop-client"})
    assert cancelled["runId"] == run_id and cancelled["status"] in ("cancelling", "cancelled")
    wait_for(owc, run_id, "cancelled", timeout=5)
    events = poll_all(owc, run_id)
    assert events[-1]["type"] == "run.cancelled" and events[-1]["payload"]["reason"] == "openwop-client"
    with pytest.raises(ClientRefused) as again:
        owc.call("runs_cancel", run_id)
    assert refusal(again, 409, "run_terminal")["details"] == {"runStatus": "cancelled"}
    assert poll_all(owc, run_id) == events, "the refused cancel wrote nothing"
    ended = create(owc)["runId"]
    wait_for(owc, ended, "completed")
    with pytest.raises(ClientRefused) as completed:
        owc.call("runs_cancel", ended, body={"reason": "too late"})
    assert refusal(completed, 409, "run_terminal")["details"] == {"runStatus": "completed"}


def test_bulk_cancel_answers_each_run_in_order(owc: Owc27, host: Host, other_tenant_key: str) -> None:
    live = [running_first(owc, 15000) for _ in range(2)]
    ended = create(owc)["runId"]
    wait_for(owc, ended, "completed")
    with host.client(other_tenant_key) as acme:
        theirs = acme.post("/runs", json={"workflowId": "delayed"}, headers={"OpenWOP-Version": "2.0"}).json()["runId"]
    unknown = "default/run_00000000000000000000000000000000"
    ids = [*live, ended, theirs, unknown]
    results = owc.call("runs_bulk_cancel", body={"runIds": ids, "reason": "bulk"})["results"]
    assert [r["runId"] for r in results] == ids
    assert [r["ok"] for r in results] == [True, True, False, False, False]
    assert all(r["status"] in ("cancelling", "cancelled") and r["error"] is None for r in results[:2])
    codes = [(r["status"], r["error"]["error"]) for r in results[2:]]
    assert codes == [(None, "run_terminal"), (None, "id_tenant_mismatch"), (None, "not_found")]
    for run_id in live:
        wait_for(owc, run_id, "cancelled", timeout=5)
    assert owc.call("runs_get", ended)["status"] == "completed"
    with host.client(other_tenant_key) as acme:
        theirs_now = acme.get(f"/runs/{project(theirs)}", headers={"OpenWOP-Version": "2.0"}).json()
        assert theirs_now["status"] in ("pending", "running"), "another tenant's run is untouched"
        acme.post(f"/runs/{project(theirs)}/cancel", headers={"OpenWOP-Version": "2.0"})
    with pytest.raises(ClientRefused) as over:
        owc.call("runs_bulk_cancel", body={"runIds": [f"default/run_{n:032x}" for n in range(101)]})
    assert refusal(over, 400, "validation_error")["details"]["maxRunIds"] == 100


def test_pause_holds_the_run_and_resume_finishes_it(owc: Owc27) -> None:
    run_id = running_first(owc, 2000)
    paused = owc.call("runs_pause", run_id, body={"reason": "hold", "drainPolicy": "immediate"})
    assert paused["runId"] == run_id and paused["status"] == "paused" and paused["pausedAt"]
    assert status_of(owc, run_id) == "paused"
    with pytest.raises(ClientRefused) as twice:
        owc.call("runs_pause", run_id)
    assert refusal(twice, 409, "run_state_conflict")["details"]["runStatus"] == "paused"
    held = poll_all_so_far(owc, run_id)
    assert held[-1]["type"] == "run.paused"
    assert held[-1]["payload"] == {
        "reason": "hold",
        "drainPolicy": "immediate",
        "interruptedNodeId": "first",
        "interruptedAttempt": 1,
    }

    resumed = owc.call("runs_resume", run_id, body={"reason": "go on"})
    assert resumed["runId"] == run_id and resumed["status"] == "running"
    assert resumed["resumedAt"] >= paused["pausedAt"]
    with pytest.raises(ClientRefused) as not_paused:
        owc.call("runs_resume", run_id)
    refusal(not_paused, 409, "run_state_conflict")
    events = owc.call("runs_events", run_id, kwargs={"stream_mode": "debug"})
    types = [e["type"] for e in events]
    assert types.index("run.paused") < types.index("run.resumed") < types.index("run.completed")
    completed = [e["nodeId"] for e in events if e["type"] == "node.completed"]
    assert completed == ["first", "second"], "each node completed once, in order"
    assert status_of(owc, run_id) == "completed"


def poll_all_so_far(owc: Owc27, run_id: str) -> list[dict[str, Any]]:
    """Every event a live run has logged yet (one poll that does not wait)."""
    events: list[dict[str, Any]] = owc.call("runs_poll_events", run_id, kwargs={"timeout_seconds": 0})["events"]
    return events


# webhooks ----------------------------------------------------------------------------------------------------


def _signed(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, "{timestamp}.{rawBody}")>`` (webhooks.md), the way a subscriber checks it."""
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def _arrived(rx: Receiver, path: str) -> list[Received]:
    return [r for r in list(rx.requests) if r.path == path]


def test_webhooks_register_deliver_dead_letter_and_unregister(owc: Owc27, rx: Receiver, broken: Receiver) -> None:
    ok_path, fail_path = f"/ok/{uuid.uuid4().hex}", f"/fail/{uuid.uuid4().hex}"
    hook = owc.call("webhooks_register", body={"url": rx.url(ok_path), "events": ["run.completed"], "tags": ["hooked"]})
    assert BOUND.fullmatch(hook["subscriptionId"]) and hook["subscriptionId"].startswith("default/wh_"), hook
    assert hook["url"] == rx.url(ok_path) and hook["createdAt"] and hook["eventTypes"] == ["run.completed"]
    assert re.fullmatch(r"[0-9a-f]{64}", hook["secret"]), "a secret made by the host, shown once"
    failing = owc.call(
        "webhooks_register", body={"url": broken.url(fail_path), "events": ["run.completed"], "tags": ["hooked"]}
    )

    run_id = create(owc, inputs={"prompt": "hooked"}, tags=["hooked"])["runId"]
    [delivery] = wait_until(lambda: _arrived(rx, ok_path), what="the delivery")
    body = orjson.loads(delivery.body)
    assert body["runId"] == run_id and body["event"]["type"] == "run.completed"
    assert body["event"]["payload"]["outputs"] == {"payload": "hooked"}
    openwop_validator("v2/webhook-delivery").validate(body)
    headers = delivery.headers
    assert headers["openwop-webhook-id"] == hook["subscriptionId"]
    assert headers["openwop-signature"] == _signed(hook["secret"], headers["openwop-timestamp"], delivery.body)

    def dead() -> list[dict[str, Any]] | None:
        page = owc.call("webhooks_dead_letters", failing["subscriptionId"])
        letters: list[dict[str, Any]] = page["deliveries"]
        return letters or None

    [letter] = wait_until(dead, timeout=20, what="the failing delivery to be dead-lettered")
    assert len(_arrived(broken, fail_path)) == MAX_ATTEMPTS, "every advertised attempt, then no more"
    assert letter["webhookId"] == failing["subscriptionId"] and letter["runId"] == run_id
    assert BOUND.fullmatch(letter["deliveryId"])
    assert (letter["eventType"], letter["attempts"], letter["reason"], letter["lastStatus"]) == (
        "run.completed",
        MAX_ATTEMPTS,
        "retries_exhausted",
        500,
    )
    assert letter["eventId"] == body["event"]["eventId"], "the same event the healthy subscriber got"
    assert owc.call("webhooks_dead_letters", hook["subscriptionId"], kwargs={"limit": 10})["deliveries"] == []

    for made in (hook, failing):
        assert owc.call("webhooks_unregister", made["subscriptionId"]) is None
    with pytest.raises(ClientRefused) as gone:
        owc.call("webhooks_dead_letters", failing["subscriptionId"])
    refusal(gone, 404, "not_found")
    with pytest.raises(ClientRefused) as twice:
        owc.call("webhooks_unregister", hook["subscriptionId"])
    refusal(twice, 404, "not_found")
    witness_path = f"/ok/{uuid.uuid4().hex}"
    witness = owc.call(
        "webhooks_register", body={"url": rx.url(witness_path), "events": ["run.completed"], "tags": ["hooked"]}
    )
    later = create(owc, tags=["hooked"])["runId"]
    [seen] = wait_until(lambda: _arrived(rx, witness_path), what="the later run's delivery to a live subscription")
    assert orjson.loads(seen.body)["runId"] == later
    assert len(_arrived(rx, ok_path)) == 1, "nothing for the later run went to the unregistered subscription"
    assert owc.call("webhooks_unregister", witness["subscriptionId"]) is None


def test_a_supplied_secret_is_never_echoed_so_the_client_loses_the_answer(
    owc: Owc27, http: httpx.Client, rx: Receiver
) -> None:
    """openwop-client 2.7.0 reads ``secret`` from every 201 (a KeyError without it), but the spec's 201 is
    ``{webhookId}`` and a supplied secret is never echoed: this host keeps the spec, so the client raises
    though the subscription was made, and its id reaches the subscriber only in delivery headers."""
    path, tag = f"/ok/{uuid.uuid4().hex}", f"chosen-{uuid.uuid4().hex[:8]}"
    supplied = "a secret the subscriber chose, 32 characters or more"
    with pytest.raises(ClientRefused) as unread:
        owc.call(
            "webhooks_register",
            body={"url": rx.url(path), "events": ["run.completed"], "secret": supplied, "tags": [tag]},
        )
    assert unread.value.kind == "KeyError" and "'secret'" in str(unread.value)

    create(owc, tags=[tag])
    [delivery] = wait_until(lambda: _arrived(rx, path), what="a delivery to the subscription the client lost")
    made = delivery.headers["openwop-webhook-id"]
    assert BOUND.fullmatch(made)
    assert delivery.headers["openwop-signature"] == _signed(
        supplied, delivery.headers["openwop-timestamp"], delivery.body
    )
    assert owc.call("webhooks_unregister", made) is None

    raw = http.post("/webhooks", json={"url": rx.url(path), "events": ["run.completed"], "secret": supplied})
    assert raw.status_code == 201, raw.text
    assert "secret" not in raw.json() and supplied not in raw.text, "what the client could not read: no secret"
    assert raw.json()["subscriptionId"] == raw.json()["webhookId"] and raw.json()["url"] == rx.url(path)
    assert owc.call("webhooks_unregister", raw.json()["webhookId"]) is None


# authentication ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_key", ["tk_0123456789abcdef_" + "0" * 64, "not-a-key"], ids=["unknown", "malformed"])
def test_a_bad_key_is_401_unauthenticated_and_does_nothing(driver: Owc27, owc: Owc27, host: Host, bad_key: str) -> None:
    before = owc.call("runs_list", kwargs={"limit": 100})["runs"]
    run_id = before[0]["runId"] if before else "default/run_00000000000000000000000000000000"
    driver.connect(host.url, bad_key, as_="stranger")
    for method, args, body in (
        ("runs_get", [run_id], None),
        ("runs_list", [], None),
        ("runs_create", [], {"workflowId": "echo"}),
        ("runs_cancel", [run_id], None),
        ("webhooks_register", [], {"url": "https://hooks.example.com/x", "events": ["run.completed"]}),
    ):
        with pytest.raises(ClientRefused) as refused:
            driver.call(method, *args, body=body, as_="stranger")
        refusal(refused, 401, "unauthenticated")
    with pytest.raises(ClientRefused) as stream:
        driver.call("runs_events", run_id, as_="stranger")
    assert (stream.value.kind, stream.value.status) == ("HTTPError", 401), "the SSE consumer raises urllib's error"
    assert json.loads(stream.value.raw or "{}")["error"] == "unauthenticated"
    assert owc.call("runs_list", kwargs={"limit": 100})["runs"] == before, "nothing was created or cancelled"
    assert driver.call("discovery_capabilities", as_="stranger")["preferredVersion"], "discovery needs no key"
