"""The sample workflows the fault harness drives, each as idempotent steps and a final check.

A step writes into ``ctx.acked`` only what a host acknowledged (a 2xx, a JSON-RPC result);
run again after a restart, it skips what was acknowledged and asks again for what was not
(an unacknowledged request may or may not have written: both are allowed). The checks are
the invariants: nothing acknowledged lost, no sequence gap, no node run twice, every
delivery made with one stable id and body, the A2A task state the projection of its run,
one remote task per hand-off.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pg
import trustme
from crash import Ctx, Doc, FaultHost, Scenario, armed_env, sequence_clean
from handoff_hosts import free_port, write_tls
from receiver import Receiver, egress_to
from workflow_docs import node, workflow_doc

from tether.a2a.projection import RUN_TO_TASK_STATE

#: hosts poll and retry fast here: the harness waits on conditions, and every second is paid per crash
FAST = ("--enable-test-seams", "--push-retry-schedule", "200ms,400ms,800ms", "--lease-seconds", "2")


def _hosts(folder: Path, store: str, database: str | None, *args: str) -> Ctx:
    """Host ``a`` (armed as asked), and on PostgreSQL a second host ``a2`` on the same database."""
    a = FaultHost(folder / "a", *FAST, *args, database_url=database)
    a.env = armed_env("a")
    a.start()
    assert a.dev_key
    hosts = {"a": a}
    if store == "postgres":  # a second host on the database (the same host key, as every host of one database)
        shared = ("--secret-key-file", str(a.data_dir / "host.key"))
        hosts["a2"] = FaultHost(folder / "a2", *FAST, *args, *shared, database_url=database).start()
    return Ctx(hosts, a.dev_key, folder)


def _with_receiver(start: Callable[..., Ctx]) -> Callable[[Path, str, str | None], Ctx]:
    def begin(folder: Path, store: str, database: str | None) -> Ctx:
        receiver = Receiver(trustme.CA(), folder).start()
        try:
            ctx = start(folder, store, database, *egress_to(receiver))
        except BaseException:
            receiver.stop()
            raise
        ctx.extra["receiver"] = receiver
        return ctx

    return begin


def _stop_receiver(ctx: Ctx) -> None:
    receiver = ctx.extra.get("receiver")
    if receiver is not None:
        receiver.stop()


# steps ------------------------------------------------------------------------------------------


def _create(workflow: str, inputs: Doc | None = None) -> Callable[[Ctx], None]:
    def create(ctx: Ctx) -> None:
        if "run" in ctx.acked:
            return
        with ctx.http() as http:
            body = {"workflowId": workflow, "inputs": inputs or {}}
            answer = ctx.call(lambda: http.post("/v1/runs", json=body))
        assert answer.status_code == 201, answer.text
        ctx.acked["run"] = answer.json()["runId"]

    return create


def _status(ctx: Ctx, run_id: str, host: str = "a") -> str:
    with ctx.http(host) as http:
        answer = http.get(f"/v1/runs/{run_id}")
    return str(answer.json()["status"]) if answer.status_code == 200 else f"HTTP {answer.status_code}"


def _until(*statuses: str, key: str = "run") -> Callable[[Ctx], None]:
    def wait(ctx: Ctx) -> None:
        run_id = ctx.acked[key]
        ctx.until(lambda: _status(ctx, run_id) in statuses, f"run {run_id} to be {'/'.join(statuses)}")

    return wait


def _gate(status: str) -> Callable[[Ctx], None]:
    """Wait for the run to wait at its gate, or to be past it (an answer or cancel written before a crash)."""

    def past(ctx: Ctx, run_id: str) -> bool:
        found = _status(ctx, run_id)
        if found == status or found in ("completed", "failed", "cancelled", "cancelling"):
            return True
        return any(e["type"] == "interrupt.resolved" for e in _events(ctx, run_id))

    def wait(ctx: Ctx) -> None:
        run_id = ctx.acked["run"]
        ctx.until(lambda: past(ctx, run_id), f"run {run_id} to be {status} or past it")

    return wait


def _refused(ctx: Ctx) -> None:
    """A refused answer (an action the gate does not offer) writes nothing: the run's log is as it was."""
    if "answer" in ctx.acked:
        return
    run_id = ctx.acked["run"]
    before = len(_events(ctx, run_id))
    with ctx.http() as http:
        sent = ctx.call(lambda: http.post(f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "no"}}))
    if sent.status_code in (404, 409):
        return  # past the gate already (an answer the host died acknowledging)
    assert sent.status_code == 400, f"an action the gate does not offer answered {sent.status_code}"
    after = len(_events(ctx, run_id))
    assert after == before, f"a refused answer wrote: the log went from {before} to {after} events"


def _answer(node_id: str, value: Any) -> Callable[[Ctx], None]:
    def answer(ctx: Ctx) -> None:
        if "answer" in ctx.acked:
            return
        run_id = ctx.acked["run"]
        with ctx.http() as http:
            sent = ctx.call(lambda: http.post(f"/v1/runs/{run_id}/interrupts/{node_id}", json={"resumeValue": value}))
        if sent.status_code == 409 and sent.json().get("error") == "interrupt_already_resolved":
            ctx.acked["answer"] = "by an earlier request the host died answering"
            return
        assert sent.status_code == 200, sent.text
        ctx.acked["answer"] = True

    return answer


def _cancel(ctx: Ctx) -> None:
    if "cancel" in ctx.acked:
        return
    run_id = ctx.acked["run"]
    with ctx.http() as http:
        sent = ctx.call(lambda: http.post(f"/v1/runs/{run_id}/cancel"))
    assert sent.status_code in (200, 202), sent.text
    ctx.acked["cancel"] = True


def _events(ctx: Ctx, run_id: str, host: str = "a") -> list[Doc]:
    with ctx.http(host) as http:
        answer = http.get(f"/v1/runs/{run_id}/events/poll", params={"lastSequence": -1, "timeout": 0})
    assert answer.status_code == 200, f"run {run_id}: events answered {answer.status_code}"
    events: list[Doc] = answer.json()["events"]
    return events


def _ended(status: str) -> Callable[[Ctx], None]:
    """The acknowledged run is there, ``status``, its log whole."""

    def check(ctx: Ctx) -> None:
        run_id = ctx.acked["run"]
        found = _status(ctx, run_id)
        assert found == status, f"acknowledged run {run_id} is {found}, not {status}"
        docs = _events(ctx, run_id)
        sequence_clean(docs, f"run {run_id}")
        if "answer" in ctx.acked:
            resolved = [e for e in docs if e["type"] == "interrupt.resolved"]
            assert len(resolved) == 1, f"acknowledged answer: {len(resolved)} interrupt.resolved events"
        if "cancel" in ctx.acked:
            assert found == "cancelled", f"acknowledged cancel lost: run {run_id} is {found}"

    return check


def _deliveries_stable(ctx: Ctx) -> dict[str, bytes]:
    """The receiver's deliveries by ``webhook-id``; each id always with one body."""
    receiver: Receiver = ctx.extra["receiver"]
    bodies: dict[str, set[bytes]] = {}
    for request in list(receiver.requests):
        bodies.setdefault(request.headers["webhook-id"], set()).add(request.body)
    unstable = [i for i, b in bodies.items() if len(b) > 1]
    assert not unstable, f"a delivery id sent with different bodies: {unstable}"
    return {i: next(iter(b)) for i, b in bodies.items()}


# webhook ----------------------------------------------------------------------------------------


def _register_webhook(ctx: Ctx) -> None:
    if "webhook" in ctx.acked:
        return
    receiver: Receiver = ctx.extra["receiver"]
    with ctx.http() as http:
        sent = ctx.call(
            lambda: http.post("/v1/webhooks", json={"url": receiver.url("/hook"), "events": ["run.completed"]})
        )
    assert sent.status_code == 201, sent.text
    ctx.acked["webhook"] = sent.json()


def _completion_delivered(ctx: Ctx) -> None:
    run_id = ctx.acked["run"]
    ctx.until(
        lambda: any(json.loads(body).get("runId") == run_id for body in _deliveries_stable(ctx).values()),
        f"run {run_id}'s run.completed at the receiver",
    )


def _outbox_settled(ctx: Ctx) -> None:
    """Every delivery the outbox holds is marked delivered, each was received under its own id at
    least once, and the receiver got no id the outbox does not hold (no receipt lost, no stray id)."""

    def outbox() -> list[Doc] | None:
        with ctx.http() as http:
            rows: list[Doc] = http.get("/v1/deliveries", params={"limit": 1000}).json()["deliveries"]
        return rows if rows and all(r["status"] == "delivered" for r in rows) else None

    rows = ctx.until(outbox, "every delivery marked delivered")
    received = _deliveries_stable(ctx)
    held = {r["deliveryId"] for r in rows}
    never = held - set(received)
    assert not never, f"deliveries marked delivered that the receiver never got: {sorted(never)}"
    stray = set(received) - held
    assert not stray, f"the receiver got ids the outbox does not hold: {sorted(stray)}"


def _webhook_check(ctx: Ctx) -> None:
    _ended("completed")(ctx)
    _outbox_settled(ctx)
    delivered = [json.loads(body) for body in _deliveries_stable(ctx).values()]
    mine = [d for d in delivered if d.get("runId") == ctx.acked["run"]]
    assert mine, "the acknowledged run's run.completed was never delivered"


# A2A push ---------------------------------------------------------------------------------------


def _rpc(ctx: Ctx, method: str, params: Doc) -> Doc:
    with ctx.http() as http:
        answer = ctx.call(
            lambda: http.post("/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        )
    body: Doc = answer.json()
    assert "result" in body, f"{method}: {body}"
    result: Doc = body["result"]
    return result


def _a2a_send(ctx: Ctx) -> None:
    if "run" in ctx.acked:
        return
    receiver: Receiver = ctx.extra["receiver"]
    message = {
        "role": "user",
        "messageId": "msg-faults-1",
        "kind": "message",
        "parts": [{"kind": "text", "text": "draft"}],
        "metadata": {"skillId": "approval-gated"},
    }
    config = {"blocking": False, "pushNotificationConfig": {"url": receiver.url("/push"), "token": "t"}}
    task = _rpc(ctx, "message/send", {"message": message, "configuration": config})
    ctx.acked["run"] = task["id"]


def _a2a_check(ctx: Ctx) -> None:
    _ended("completed")(ctx)
    run_id = ctx.acked["run"]
    task = _rpc(ctx, "tasks/get", {"id": run_id})
    state = task["status"]["state"]
    assert state == RUN_TO_TASK_STATE[_status(ctx, run_id)], f"A2A task {run_id} is {state}, its run is not"
    _outbox_settled(ctx)
    pushed = [json.loads(body) for body in _deliveries_stable(ctx).values()]
    states = [p.get("status", {}).get("state") for p in pushed]
    assert "completed" in states, f"the task's completion was never pushed: {states}"


def _pushed_completion(ctx: Ctx) -> None:
    ctx.until(
        lambda: any(
            json.loads(body).get("status", {}).get("state") == "completed" for body in _deliveries_stable(ctx).values()
        ),
        "the completion's push",
    )


# hand-off to a second Tether host ---------------------------------------------------------------


def _handoff_hosts(folder: Path, store: str, database: str | None) -> Ctx:
    stack = ExitStack()
    ca_file, cert, key = write_tls(folder)
    tls = ("--tls-certfile", str(cert), "--tls-keyfile", str(key), "--egress-ca-bundle", str(ca_file))
    secure = ("--egress-allow-cidr", "127.0.0.1/32")
    b_database = stack.enter_context(pg.migrated_database()) if store == "postgres" else None
    b_port, a_port = free_port(), free_port()
    b = FaultHost(folder / "b", *FAST, *tls, *secure, "--port", str(b_port), "--a2a-anonymous-tenant", "default")
    b.database_url = b_database
    b.env = armed_env("b")
    b.start()
    flows = folder / "a-workflows"
    flows.mkdir()
    prompt = {"prompt": {"type": "variable", "variableName": "prompt"}}
    config = {"agent": b.url, "skill": "approval-gated"}
    handoff = node("peer", "vendor.tether.a2a-handoff", config=config, inputs=prompt)
    variables = [{"name": "prompt", "type": "string", "required": False}]
    (flows / "hand-approval.json").write_text(json.dumps(workflow_doc("hand-approval", [handoff], [], variables)))
    a_args = (*FAST, *tls, *secure, "--port", str(a_port), "--workflows", str(flows), "--handoff-poll-max-seconds", "2")
    a = FaultHost(folder / "a", *a_args, database_url=database)
    a.env = armed_env("a")
    a.start()
    assert a.dev_key and b.dev_key
    ctx = Ctx({"a": a, "b": b}, a.dev_key, folder)
    ctx.extra.update(verify=ssl.create_default_context(cafile=str(ca_file)), b_key=b.dev_key, stack=stack)
    return ctx


def _b_http(ctx: Ctx) -> Any:
    client = ctx.http("b")
    client.headers["Authorization"] = f"Bearer {ctx.extra['b_key']}"
    return client


def _peer_task(ctx: Ctx) -> None:
    run_id = ctx.acked["run"]

    def task_id() -> str | None:
        with ctx.http() as http:
            doc = http.get(f"/v1/runs/{run_id}").json()
        found: str | None = doc["nodeStates"].get("peer", {}).get("handoff", {}).get("taskId")
        return found

    ctx.extra["task"] = ctx.until(task_id, "A to record the peer's task")


def _approve_on_b(ctx: Ctx) -> None:
    if "answer-b" in ctx.acked:
        return
    task = ctx.extra["task"]
    with _b_http(ctx) as b:
        ctx.until(lambda: b.get(f"/v1/runs/{task}").json().get("status") != "running", "B's gate (or B past it)")
        sent = ctx.call(lambda: b.post(f"/v1/runs/{task}/interrupts/gate", json={"resumeValue": {"action": "accept"}}))
    if sent.status_code in (404, 409):  # past the gate: an answer the host died acknowledging
        ctx.acked["answer-b"] = "by an earlier request"
        return
    assert sent.status_code == 200, sent.text
    ctx.acked["answer-b"] = True


def _handoff_check(ctx: Ctx) -> None:
    run_id = ctx.acked["run"]
    found = _status(ctx, run_id)
    assert found == "completed", f"acknowledged run {run_id} on A is {found}"
    sequence_clean(_events(ctx, run_id), f"A's run {run_id}")
    # one remote task per hand-off: a run the host wrote and died before acknowledging hands off too
    with ctx.http() as a:
        a_runs = [r["runId"] for r in a.get("/v1/runs").json()["runs"]]
        recorded = [a.get(f"/v1/runs/{r}").json()["nodeStates"].get("peer", {}).get("handoff", {}) for r in a_runs]
    tasks = [r.get("taskId") for r in recorded]
    with _b_http(ctx) as b:
        b_runs = {r["runId"]: r["status"] for r in b.get("/v1/runs").json()["runs"]}
        assert len(b_runs) == len(a_runs), f"{len(b_runs)} remote tasks for {len(a_runs)} hand-offs"
        assert set(b_runs) == set(tasks), f"remote tasks {sorted(b_runs)} are not those A recorded {tasks}"
        mine = ctx.extra["task"]
        answer = b.get(f"/v1/runs/{mine}/events/poll", params={"lastSequence": -1, "timeout": 0})
        sequence_clean(answer.json()["events"], f"B's run {mine}")
        assert b_runs[mine] == "completed", f"B's task is {b_runs[mine]}"


def _handoff_cleanup(ctx: Ctx) -> None:
    for host in ctx.hosts.values():
        host.kill()
    ctx.extra["stack"].close()


def _plain(folder: Path, store: str, database: str | None) -> Ctx:
    return _hosts(folder, store, database)


# fork (OpenWOP v2) and retention ----------------------------------------------------------------

#: one fork request, however often it is asked again: the key makes it one fork
_FORK_KEY = "faults-fork-key-0123456789abcdef"


def _fork(ctx: Ctx) -> None:
    if "fork" in ctx.acked:
        return
    source = "default~2F" + ctx.acked["run"]
    with ctx.http() as http:
        http.headers["OpenWOP-Version"] = "2.0"
        sent = ctx.call(
            lambda: http.post(f"/runs/{source}:fork", json={"mode": "replay"}, headers={"Idempotency-Key": _FORK_KEY})
        )
    assert sent.status_code == 201, sent.text
    ctx.acked["fork"] = sent.json()["runId"].partition("/")[2]


def _fork_check(ctx: Ctx) -> None:
    _ended("completed")(ctx)
    fork = ctx.acked["fork"]
    found = _status(ctx, fork)
    assert found == "completed", f"acknowledged fork {fork} is {found}"
    sequence_clean(_events(ctx, fork), f"fork {fork}")
    source = "default/" + ctx.acked["run"]
    with ctx.http() as http:
        runs = [r["runId"] for r in http.get("/v1/runs", params={"workflowId": "echo"}).json()["runs"]]
        http.headers["OpenWOP-Version"] = "2.0"
        snapshots = [http.get(f"/runs/default~2F{r}").json() for r in runs]
    forks = [x for x in snapshots if x.get("extensions", {}).get("tether.fork", {}).get("sourceRunId") == source]
    assert len(forks) == 1, f"one fork request (one Idempotency-Key) made {len(forks)} forks"


def _purged(ctx: Ctx) -> None:
    run_id = ctx.acked["run"]
    ctx.until(lambda: _status(ctx, run_id) == "HTTP 404", f"run {run_id} to be purged", timeout=30)


def _purge_check(ctx: Ctx) -> None:
    run_id = ctx.acked["run"]
    assert _status(ctx, run_id) == "HTTP 404", f"purged run {run_id} is back"
    with ctx.http() as http:
        answer = http.get(f"/v1/runs/{run_id}/events/poll", params={"lastSequence": -1, "timeout": 0})
    assert answer.status_code == 404, f"a purged run's events answer {answer.status_code}"


def _short_retention(folder: Path, store: str, database: str | None) -> Ctx:
    return _hosts(folder, store, database, "--task-retention", "2s")


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("echo", _plain, (_create("echo", {"prompt": "hi"}), _until("completed")), _ended("completed")),
        Scenario(
            "multi-node", _plain, (_create("multi-step", {"prompt": "hi"}), _until("completed")), _ended("completed")
        ),
        Scenario(
            "approval",
            _plain,
            (
                _create("approval-gated", {"prompt": "draft"}),
                _gate("waiting-approval"),
                _refused,
                _answer("gate", {"action": "accept"}),
                _until("completed"),
            ),
            _ended("completed"),
        ),
        Scenario(
            "clarification",
            _plain,
            (
                _create("clarification-gated"),
                _gate("waiting-input"),
                _answer("ask", {"answers": {"q1": "blue"}}),
                _until("completed"),
            ),
            _ended("completed"),
        ),
        Scenario(
            "cancel",
            _plain,
            (_create("approval-gated", {"prompt": "draft"}), _gate("waiting-approval"), _cancel, _until("cancelled")),
            _ended("cancelled"),
        ),
        Scenario(
            "webhook",
            _with_receiver(_hosts),
            (_register_webhook, _create("echo", {"prompt": "hi"}), _until("completed"), _completion_delivered),
            _webhook_check,
            cleanup=_stop_receiver,
        ),
        Scenario(
            "a2a-push",
            _with_receiver(_hosts),
            (
                _a2a_send,
                _gate("waiting-approval"),
                _answer("gate", {"action": "accept"}),
                _until("completed"),
                _pushed_completion,
            ),
            _a2a_check,
            cleanup=_stop_receiver,
        ),
        Scenario(
            "fork",
            _plain,
            (_create("echo", {"prompt": "hi"}), _until("completed"), _fork, _until("completed", key="fork")),
            _fork_check,
        ),
        Scenario(
            "retention",
            _short_retention,
            (_create("echo", {"prompt": "hi"}), _purged),
            _purge_check,
        ),
        Scenario(
            "handoff",
            _handoff_hosts,
            (_create("hand-approval", {"prompt": "draft"}), _peer_task, _approve_on_b, _until("completed")),
            _handoff_check,
            armed=("a", "b"),
            cleanup=_handoff_cleanup,
        ),
    )
}
