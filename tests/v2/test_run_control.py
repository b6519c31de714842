"""Run control at major 2: cancel, bulk-cancel, pause and resume, through the unversioned paths.

What the conformance suite asserts (``v2-run-cancel``, ``v2-run-bulk-cancel``,
``v2-run-pause-resume``) and more: every refusal in the official v2 envelope with its
registered status, ids in every path spelling and every wrong shape (another tenant's id
refused exactly like an unknown one of that tenant), closed bodies, and nothing written by
a refused request. The same run read through v1 (its status, its events) and over A2A (a
paused task is ``working``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from backends import suite_host
from harness import Host, wait_until
from keys import made_key
from schemas import a2a_validator, openwop_validator
from v2_wire import create, project, refused, wait_status
from workflow_docs import node, workflow_doc

#: a delay as long as ``inputs.delayMs``, a short one, a no-op (the suite's ``conformance-delay`` shape, and more)
PAUSABLE = workflow_doc(
    "pausable",
    [
        node("first", "core.delay", inputs={"delayMs": {"type": "variable", "variableName": "delayMs"}}),
        node("second", "core.delay", config={"delayMs": 300}),
        node("done"),
    ],
    [
        {"id": "e1", "sourceNodeId": "first", "targetNodeId": "second"},
        {"id": "e2", "sourceNodeId": "second", "targetNodeId": "done"},
    ],
    [{"name": "delayMs", "type": "number", "defaultValue": 15000}],
)
ROUTES = ("/cancel", ":pause", ":resume")
FOREIGN = "openwop-conformance-foreign-tenant/foreignopaque0123456789abcdef"


@pytest.fixture(scope="module")
def workflows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("control-workflows")
    (folder / "pausable.json").write_text(json.dumps(PAUSABLE))
    return folder


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str, workflows: Path) -> Host:
    return suite_host(request, "--workflows", str(workflows))


@pytest.fixture
def v1(host: Host, key: str) -> Iterator[httpx.Client]:
    """A client of the same host at major 1 (no ``OpenWOP-Version: 2.0``)."""
    with host.client(key) as client:
        yield client


def _bare(bound: str) -> str:
    return bound.partition("/")[2]


def _started(http: httpx.Client, v1: httpx.Client, delay_ms: int = 15000) -> str:
    """A pausable run, its first delay sleeping; its bound id."""
    run_id: str = create(http, "pausable", inputs={"delayMs": delay_ms})["runId"]
    wait_until(lambda: _v1_run(v1, run_id)["nodeStates"].get("first", {}).get("status") == "running", what="a delay")
    return run_id


def _ended(http: httpx.Client) -> str:
    run_id: str = create(http)["runId"]
    wait_status(http, run_id, "completed")
    return run_id


def _v1_run(v1: httpx.Client, bound: str) -> dict[str, Any]:
    answer = v1.get(f"/v1/runs/{_bare(bound)}")
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()
    return run


def _log(v1: httpx.Client, bound: str) -> list[dict[str, Any]]:
    """The run's stored events, read through v1 (the log every major shares)."""
    answer = v1.get(f"/v1/runs/{_bare(bound)}/events/poll", params={"timeout": 0})
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = answer.json()["events"]
    return events


def _types(v1: httpx.Client, bound: str) -> list[str]:
    return [e["type"] for e in _log(v1, bound)]


def _all_runs(v1: httpx.Client) -> list[tuple[str, str, int]]:
    """Every run of the tenant as (id, status, last sequence): what a refused request must leave as it was."""
    runs = v1.get("/v1/runs", params={"limit": 500}).json()["runs"]
    return [(r["runId"], r["status"], r["lastSequence"]) for r in runs]


# --- cancel -----------------------------------------------------------------------------------------------


def test_cancel_answers_200_then_run_terminal(http: httpx.Client, v1: httpx.Client) -> None:
    run_id = _started(http, v1)
    answer = http.post(f"/runs/{project(run_id)}/cancel", json={"reason": "conformance"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["openwop-version"] == "2.0"
    body = answer.json()
    assert body["runId"] == run_id and body["status"] in ("cancelling", "cancelled")
    assert set(body) == {"runId", "status"}
    wait_status(http, run_id, "cancelled", timeout=5)
    cancelled = [e for e in _log(v1, run_id) if e["type"] == "run.cancelled"]
    assert len(cancelled) == 1 and cancelled[0]["payload"]["reason"] == "conformance"
    log = _log(v1, run_id)
    again = refused(http.post(f"/runs/{project(run_id)}/cancel", json={}), 409, "run_terminal")
    assert again["details"]["runStatus"] == "cancelled"
    assert _log(v1, run_id) == log, "the refused cancel wrote nothing"


def test_cancel_of_a_completed_run_is_run_terminal(http: httpx.Client, v1: httpx.Client) -> None:
    run_id = _ended(http)
    log = _log(v1, run_id)
    body = refused(http.post(f"/runs/{project(run_id)}/cancel", json={}), 409, "run_terminal")
    assert body["details"] == {"runStatus": "completed"}
    assert _log(v1, run_id) == log
    assert v1.post(f"/v1/runs/{_bare(run_id)}/cancel").status_code == 409, "v1 keeps its own answer"


@pytest.mark.parametrize("spelling", ["projected", "percent", "bare"])
def test_cancel_takes_every_spelling_of_the_id(http: httpx.Client, v1: httpx.Client, spelling: str) -> None:
    run_id = _started(http, v1)
    segment = {"projected": project(run_id), "percent": run_id.replace("/", "%2F"), "bare": _bare(run_id)}[spelling]
    answer = http.post(f"/runs/{segment}/cancel")  # no body: the same as {}
    assert answer.status_code == 200, answer.text
    assert answer.json()["runId"] == run_id, "the answer names the bound id, however the path spelt it"


# --- bulk cancel ------------------------------------------------------------------------------------------


def test_bulk_cancel_over_the_cap_is_400_at_the_root_and_cancels_nothing(http: httpx.Client, v1: httpx.Client) -> None:
    live = _started(http, v1)
    before = _all_runs(v1)
    ids = [live] + [f"openwop-conformance-bulk-cap/opaque{n:03d}0123456789abcdef" for n in range(100)]
    body = refused(http.post("/runs:bulk-cancel", json={"runIds": ids}), 400, "validation_error")
    assert body["details"]["maxRunIds"] == 100
    assert _all_runs(v1) == before, "an over-cap request cancels none of its runs"
    exactly = http.post("/runs:bulk-cancel", json={"runIds": [live] + ids[1:100]})
    assert exactly.status_code == 200, "100 is within the cap"
    assert exactly.json()["results"][0] == {"runId": live, "ok": True, "status": "cancelling"}


def test_bulk_cancel_answers_each_entry_in_order(
    http: httpx.Client, v1: httpx.Client, host: Host, other_tenant_key: str
) -> None:
    live = _started(http, v1)
    ended = _ended(http)
    with host.client(other_tenant_key) as acme:
        theirs = acme.post("/runs", json={"workflowId": "pausable"}, headers={"OpenWOP-Version": "2.0"}).json()["runId"]
        their_log = acme.get(f"/v1/runs/{_bare(theirs)}/events/poll", params={"timeout": 0}).json()["events"]
        unknown = f"{live.partition('/')[0]}/run_0000000000000000000000000000000000"
        ids = [live, FOREIGN, theirs, ended, unknown, "not an id", live]
        answer = http.post("/runs:bulk-cancel", json={"runIds": ids, "reason": "conformance"})
        assert answer.status_code == 200, answer.text
        results = answer.json()["results"]
        assert set(answer.json()) == {"results"}
        assert [r["runId"] for r in results] == ids, "every id echoed verbatim, in the request's order"
        first, foreign, theirs_entry, ended_entry, unknown_entry, malformed, again = results
        assert first["ok"] is True and first["status"] in ("cancelling", "cancelled")
        for entry, code in (
            (foreign, "id_tenant_mismatch"),
            (theirs_entry, "id_tenant_mismatch"),
            (ended_entry, "run_terminal"),
            (unknown_entry, "not_found"),
            (malformed, "validation_error"),
        ):
            assert entry["ok"] is False and "status" not in entry, entry
            openwop_validator("v2/error-envelope").validate(entry["error"])
            assert entry["error"]["error"] == code, entry
        assert foreign["error"] == theirs_entry["error"], "another tenant's run is refused as an unknown one of theirs"
        assert again["ok"] is True or again["error"]["error"] == "run_terminal"
        wait_status(http, live, "cancelled", timeout=5)
        after = acme.get(f"/v1/runs/{_bare(theirs)}/events/poll", params={"timeout": 0}).json()["events"]
        assert after[: len(their_log)] == their_log and "run.cancelled" not in [e["type"] for e in after]
        acme.post(f"/v1/runs/{_bare(theirs)}/cancel")


# --- pause and resume -------------------------------------------------------------------------------------


def test_pause_and_resume_answer_202_and_log_in_order(http: httpx.Client, v1: httpx.Client) -> None:
    """``v2-run-pause-resume``'s second leg, and what it leaves in the log."""
    run_id = _started(http, v1)
    paused = http.post(f"/runs/{project(run_id)}:pause", json={"reason": "conformance", "drainPolicy": "immediate"})
    assert paused.status_code == 202, paused.text
    assert paused.headers["openwop-version"] == "2.0"
    body = paused.json()
    assert body["runId"] == run_id and body["status"] == "paused" and body["pausedAt"]
    assert wait_status(http, run_id, "paused")["status"] == "paused"
    again = refused(http.post(f"/runs/{project(run_id)}:pause", json={}), 409, "run_state_conflict")
    assert again["details"]["runStatus"] == "paused"
    resumed = http.post(f"/runs/{project(run_id)}:resume", json={"reason": "conformance"})
    assert resumed.status_code == 202, resumed.text
    assert resumed.json()["runId"] == run_id and resumed.json()["status"] == "running"
    assert resumed.json()["resumedAt"] >= body["pausedAt"]
    polled = http.get(f"/runs/{project(run_id)}/events/poll", params={"timeout": 1})
    assert polled.status_code == 200, polled.text
    types = [e["type"] for e in polled.json()["events"]]
    assert "run.paused" in types and types.index("run.resumed") > types.index("run.paused")
    for event in polled.json()["events"]:
        openwop_validator("v2/run-event").validate(event)
        if event["type"] in ("run.paused", "run.resumed"):
            definition = "runPaused" if event["type"] == "run.paused" else "runResumed"
            openwop_validator(f"v2/run-event-payloads#/$defs/{definition}").validate(event["payload"])
    paused_event = next(e for e in polled.json()["events"] if e["type"] == "run.paused")
    assert paused_event["payload"] == {
        "reason": "conformance",
        "drainPolicy": "immediate",
        "interruptedNodeId": "first",
        "interruptedAttempt": 1,
    }
    cleanup = http.post(f"/runs/{project(run_id)}/cancel", json={"reason": "conformance cleanup"})
    assert cleanup.status_code == 200, cleanup.text


def test_pause_and_resume_refusals_name_the_status_and_write_nothing(http: httpx.Client, v1: httpx.Client) -> None:
    ended = _ended(http)
    live = _started(http, v1)
    gated = create(http, "approval-gated")["runId"]
    wait_status(http, gated, "waiting-approval")
    before = _all_runs(v1)
    for run_id, route, code, status in (
        (ended, ":pause", "run_terminal", "completed"),
        (ended, ":resume", "run_terminal", "completed"),
        (live, ":resume", "run_state_conflict", "running"),
        (gated, ":pause", "run_state_conflict", "waiting-approval"),
        (gated, ":resume", "run_state_conflict", "waiting-approval"),
    ):
        body = refused(http.post(f"/runs/{project(run_id)}{route}", json={}), 409, code)
        assert body["details"]["runStatus"] == status, (route, body)
    assert _all_runs(v1) == before
    for run_id in (live, gated):
        http.post(f"/runs/{project(run_id)}/cancel")


def test_racing_pauses_have_one_winner(http: httpx.Client, v1: httpx.Client, host: Host, key: str) -> None:
    run_id = _started(http, v1)

    def pause(_: int) -> httpx.Response:
        with host.client(key) as client:
            return client.post(f"/runs/{project(run_id)}:pause", json={}, headers={"OpenWOP-Version": "2.0"})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(pause, range(8)))
    assert sorted(a.status_code for a in answers) == [202] + [409] * 7
    assert _types(v1, run_id).count("run.paused") == 1
    http.post(f"/runs/{project(run_id)}/cancel")


def test_a_paused_task_reads_working_over_a2a_and_paused_on_v1(http: httpx.Client, v1: httpx.Client) -> None:
    """A run handed over as an A2A task, paused at v2: its A2A state stays ``working`` (RFC 0100's table)."""
    message = {
        "kind": "message",
        "role": "user",
        "messageId": f"pause-{uuid.uuid4()}",
        "parts": [{"kind": "data", "data": {"delayMs": 15000}}],
        "metadata": {"skillId": "pausable"},
    }
    sent = _rpc(v1, "message/send", {"message": message, "configuration": {"blocking": False}})
    task_id = sent["id"]
    run_id = f"{v1.get(f'/v1/runs/{task_id}').json()['owner']['tenant']}/{task_id}"
    wait_until(lambda: _v1_run(v1, run_id)["nodeStates"].get("first", {}).get("status") == "running", what="a delay")
    assert http.post(f"/runs/{project(run_id)}:pause", json={"drainPolicy": "immediate"}).status_code == 202
    run = _v1_run(v1, run_id)
    assert run["status"] == "paused"
    openwop_validator("run-snapshot").validate(run)
    assert task_id in [r["runId"] for r in v1.get("/v1/runs", params={"status": "paused"}).json()["runs"]]
    paused_event = next(e for e in _log(v1, run_id) if e["type"] == "run.paused")
    openwop_validator("run-event").validate(paused_event)
    openwop_validator("run-event-payloads#/$defs/runPaused").validate(paused_event["payload"])
    task = _rpc(v1, "tasks/get", {"id": task_id})
    a2a_validator("Task").validate(task)
    assert task["status"]["state"] == "working" and task["metadata"]["openwop"]["runStatus"] == "paused"
    assert _rpc(v1, "GetTask", {"id": task_id}, "1.0")["status"]["state"] == "TASK_STATE_WORKING"
    assert v1.post(f"/v1/runs/{task_id}:pause").status_code in (404, 405), "v1 has no pause"
    cancelled = v1.post(f"/v1/runs/{task_id}/cancel")
    assert cancelled.json()["status"] == "cancelled", "v1 cancels a paused run (nothing executing: at once)"
    assert _rpc(v1, "tasks/get", {"id": task_id})["status"]["state"] == "canceled"


def _rpc(client: httpx.Client, method: str, params: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    """One A2A JSON-RPC call's result (0.3, or the version named)."""
    headers = {} if version is None else {"A2A-Version": version}
    answer = client.post(
        "/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=headers
    )
    assert "result" in answer.json(), answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


# --- bad input: the right refusal, nothing written --------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_ids_in_wrong_shapes_are_refused_and_write_nothing(
    http: httpx.Client, v1: httpx.Client, host: Host, other_tenant_key: str, route: str
) -> None:
    run_id = _started(http, v1)
    tenant = run_id.partition("/")[0]
    with host.client(other_tenant_key) as acme:
        theirs = acme.post("/runs", json={"workflowId": "pausable"}, headers={"OpenWOP-Version": "2.0"}).json()["runId"]
        their_log = acme.get(f"/v1/runs/{_bare(theirs)}/events/poll", params={"timeout": 0}).json()["events"]
    before = _all_runs(v1)
    for segment in (f"{tenant}~2", f"{tenant}~ZZ{_bare(run_id)}", "a%20b", "short", f"{tenant}~2Fshort"):
        refused(http.post(f"/runs/{segment}{route}", json={}), 400, "validation_error")
    foreign = refused(http.post(f"/runs/{project(theirs)}{route}", json={}), 403, "id_tenant_mismatch")
    unknown = f"{theirs.partition('/')[0]}/run_0000000000000000000000000000000000"
    assert refused(http.post(f"/runs/{project(unknown)}{route}", json={}), 403, "id_tenant_mismatch") == foreign
    assert refused(http.post(f"/runs/{project(FOREIGN)}{route}", json={}), 403, "id_tenant_mismatch") == foreign
    own_unknown = project(f"{tenant}/run_0000000000000000000000000000000000")
    refused(http.post(f"/runs/{own_unknown}{route}", json={}), 404, "not_found")
    assert _all_runs(v1) == before, "no refused request wrote anything"
    with host.client(other_tenant_key) as acme:
        after = acme.get(f"/v1/runs/{_bare(theirs)}/events/poll", params={"timeout": 0}).json()["events"]
        assert after[: len(their_log)] == their_log
        assert not {"run.paused", "run.resumed", "run.cancelled"} & {e["type"] for e in after}
        acme.post(f"/v1/runs/{_bare(theirs)}/cancel")
    http.post(f"/runs/{project(run_id)}/cancel")


BAD_BODIES: list[tuple[str, Any]] = [
    ("an unknown key", {"reason": "x", "conformanceUnknownRootKey": 1}),
    ("a reason of another type", {"reason": 5}),
    ("a reason too long", {"reason": "x" * 513}),
    ("not an object", ["reason"]),
    ("not JSON", b"{"),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("what", "bad"), BAD_BODIES, ids=[what for what, _ in BAD_BODIES])
def test_bad_bodies_are_400_and_write_nothing(
    http: httpx.Client, v1: httpx.Client, route: str, what: str, bad: Any
) -> None:
    run_id = _started(http, v1)
    log = _log(v1, run_id)
    content = bad if isinstance(bad, bytes) else json.dumps(bad).encode()
    answer = http.post(f"/runs/{project(run_id)}{route}", content=content, headers={"Content-Type": "application/json"})
    refused(answer, 400, "validation_error")
    assert _log(v1, run_id) == log, f"{what}: nothing written"
    http.post(f"/runs/{project(run_id)}/cancel")


@pytest.mark.parametrize("policy", ["drain", "interrupt", "", None, 1])
def test_an_unknown_drain_policy_is_400(http: httpx.Client, v1: httpx.Client, policy: Any) -> None:
    run_id = _started(http, v1)
    log = _log(v1, run_id)
    body = refused(http.post(f"/runs/{project(run_id)}:pause", json={"drainPolicy": policy}), 400, "validation_error")
    assert "drainPolicy" in body["message"]
    assert _log(v1, run_id) == log
    http.post(f"/runs/{project(run_id)}/cancel")


@pytest.mark.parametrize(
    "bad",
    [
        None,
        {},
        {"runIds": []},
        {"runIds": "a/b"},
        {"runIds": [1]},
        {"runIds": ["x/yyyyyyyyyyyyyyyy"], "extra": 1},
        b"{",
    ],
    ids=["no body", "no runIds", "empty", "not a list", "not strings", "an unknown key", "not JSON"],
)
def test_bad_bulk_bodies_are_400_and_cancel_nothing(http: httpx.Client, v1: httpx.Client, bad: Any) -> None:
    live = _started(http, v1)
    before = _all_runs(v1)
    content = b"" if bad is None else bad if isinstance(bad, bytes) else json.dumps(bad).encode()
    answer = http.post("/runs:bulk-cancel", content=content, headers={"Content-Type": "application/json"})
    refused(answer, 400, "validation_error")
    assert _all_runs(v1) == before
    http.post(f"/runs/{project(live)}/cancel")


def test_a_key_without_runs_cancel_is_403_everywhere(http: httpx.Client, v1: httpx.Client, host: Host) -> None:
    reader = made_key(host, "reader", "--scopes", "runs:read,runs:create")
    run_id = _started(http, v1)
    before = _all_runs(v1)
    with host.client(reader) as client:
        client.headers["OpenWOP-Version"] = "2.0"
        for route in ROUTES:
            refused(client.post(f"/runs/{project(run_id)}{route}", json={}), 403, "forbidden")
        refused(client.post("/runs:bulk-cancel", json={"runIds": [run_id]}), 403, "forbidden")
        with host.client() as anonymous:
            anonymous.headers["OpenWOP-Version"] = "2.0"
            refused(anonymous.post(f"/runs/{project(run_id)}:pause", json={}), 401, "unauthenticated")
    assert _all_runs(v1) == before
    http.post(f"/runs/{project(run_id)}/cancel")
