"""message/send, replies into input-required tasks, tasks/get, tasks/cancel and tenancy, on the raw wire."""

from __future__ import annotations

import threading

import httpx
import pytest
from a2a_wire import WORKFLOWS, error, get_task, message, result, rpc, run_events, send, task_record, wait_state
from harness import Host
from inproc import create_key


def test_blocking_send_runs_the_default_skill_to_completion(http: httpx.Client) -> None:
    task = send(http, message("hello", message_id="m-1"))
    assert task["status"]["state"] == "completed"
    assert task["id"].startswith("run_") and task["contextId"].startswith("ctx_")
    (artifact,) = task["artifacts"]
    assert artifact["artifactId"] == f"{task['id']}-outputs"
    assert artifact["parts"][0] == {"kind": "text", "text": "hello"}
    assert [m["messageId"] for m in task["history"]] == ["m-1"]
    assert task["history"][0]["taskId"] == task["id"] and task["history"][0]["contextId"] == task["contextId"]
    events = run_events(http, task["id"])
    started = events[0]
    assert started["type"] == "run.started"
    assert started["payload"]["transport"] == "a2a"
    assert started["payload"]["workflowId"] == "echo"
    assert started["payload"]["tags"] == ["a2a:m-1", f"a2a:{task['contextId']}"]
    assert started["payload"]["metadata"]["a2a"]["contextId"] == task["contextId"]
    record = task_record(http, task["id"])
    assert record["state"] == "completed" and record["contextId"] == task["contextId"]
    assert get_task(http, task["id"])["artifacts"] == task["artifacts"], "artifact ids are stable"


def test_inputs_from_text_and_data_parts_and_the_skill_from_metadata(http: httpx.Client) -> None:
    shaped = send(http, message("Ada", skill="shape"))
    assert shaped["artifacts"][0]["parts"][-1]["data"]["greeting"] == "Hello, Ada!"
    # a data part's prompt wins over the text (shape shows its prompt; echo now echoes every part as sent)
    data_wins = send(http, message("ignored", data={"prompt": "from data"}, skill="shape"))
    assert data_wins["artifacts"][0]["parts"][-1]["data"]["greeting"] == "Hello, from data!"
    by_params = result(http, "message/send", {"message": message("Bob"), "metadata": {"skillId": "shape"}})
    assert by_params["artifacts"][0]["parts"][-1]["data"]["greeting"] == "Hello, Bob!"


def test_context_id_is_kept_when_given(http: httpx.Client) -> None:
    first = send(http, message("a", context_id="ctx-conversation-1"))
    second = send(http, message("b", context_id="ctx-conversation-1"))
    assert first["contextId"] == second["contextId"] == "ctx-conversation-1"
    assert first["id"] != second["id"]
    assert run_events(http, second["id"])[0]["payload"]["tags"][1] == "a2a:ctx-conversation-1"


def test_non_blocking_send_answers_at_once(http: httpx.Client) -> None:
    task = send(http, message(skill="slow"), blocking=False)
    assert task["status"]["state"] in ("submitted", "working")
    assert task_record(http, task["id"])["state"] == "working"


def test_blocking_send_returns_the_current_task_when_the_timeout_passes(start_host) -> None:  # type: ignore[no-untyped-def]
    host: Host = start_host("--workflows", str(WORKFLOWS), "--a2a-request-timeout", "0.3")
    assert host.dev_key
    task = send(host.http(host.dev_key), message(skill="slow"))
    assert task["status"]["state"] == "working"


@pytest.mark.fresh_host  # lists every run of the tenant
def test_idempotent_send_per_principal(host: Host, http: httpx.Client) -> None:
    first = send(http, message("once", message_id="dup-1"))
    again = send(http, message("once", message_id="dup-1"))
    assert again["id"] == first["id"] and again["contextId"] == first["contextId"]
    second_key = create_key(host.data_dir, "second")
    with host.client(second_key) as other:
        theirs = send(other, message("once", message_id="dup-1"))
    assert theirs["id"] != first["id"]
    runs = http.get("/v1/runs").json()["runs"]
    assert sorted(r["runId"] for r in runs) == sorted([first["id"], theirs["id"]])


@pytest.mark.fresh_host  # counts every run of the tenant
def test_concurrent_identical_sends_make_one_task(host: Host, key: str) -> None:
    ids: list[str] = []
    barrier = threading.Barrier(6)

    def one() -> None:
        with host.client(key) as http:
            barrier.wait()
            ids.append(send(http, message("race", message_id="race-1"), blocking=False)["id"])

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 6 and len(set(ids)) == 1
    assert len(host.http(key).get("/v1/runs").json()["runs"]) == 1


def test_approval_reply_accepts_and_decided_by_is_the_caller(http: httpx.Client) -> None:
    task = send(http, message("draft 1", skill="approval-gated", message_id="ask-1"))
    assert task["status"]["state"] == "input-required"
    interrupt = task["metadata"]["openwop"]["interrupt"]
    assert interrupt["kind"] == "approval" and interrupt["nodeId"] == "gate" and "accept" in interrupt["actions"]
    assert task_record(http, task["id"])["interruptKind"] == "approval"
    reply = message(
        data={"action": "accept", "decidedBy": "mallory", "feedback": "ship it"},
        task_id=task["id"],
        context_id=task["contextId"],
        message_id="ok-1",
    )
    done = send(http, reply)
    assert done["status"]["state"] == "completed"
    assert [m["messageId"] for m in done["history"]] == ["ask-1", "ok-1"]
    assert [m["messageId"] for m in get_task(http, task["id"], historyLength=1)["history"]] == ["ok-1"]
    assert get_task(http, task["id"], historyLength=0)["history"] == []
    received = [e for e in run_events(http, task["id"]) if e["type"] == "approval.received"]
    assert len(received) == 1 and received[0]["payload"]["decidedBy"] == "key:dev"
    assert task_record(http, task["id"])["state"] == "completed"
    retried = send(http, reply)
    assert retried["id"] == task["id"] and len(retried["history"]) == 2, "a retried reply changes nothing"


def test_legacy_approve_false_rejects(http: httpx.Client) -> None:
    task = send(http, message("draft", skill="approval-gated"))
    done = send(http, message(data={"approve": False}, task_id=task["id"]))
    assert done["status"]["state"] == "completed"
    states = http.get(f"/v1/runs/{task['id']}").json()["nodeStates"]
    assert states["gate"]["status"] == "failed" and states["on-reject"]["status"] == "completed"


def test_bad_replies_are_refused_and_change_nothing(http: httpx.Client) -> None:
    task = send(http, message("draft", skill="approval-gated"))
    bad_action = error(http, "message/send", {"message": message(data={"action": "maybe"}, task_id=task["id"])})
    assert bad_action["code"] == -32602 and "accept" in bad_action["message"]
    text_only = error(http, "message/send", {"message": message("looks fine", task_id=task["id"])})
    assert text_only["code"] == -32602 and "action" in text_only["message"]
    refine = error(http, "message/send", {"message": message(data={"action": "refine"}, task_id=task["id"])})
    assert refine["code"] == -32602 and "refineFeedback" in refine["message"]
    still = get_task(http, task["id"])
    assert still["status"]["state"] == "input-required" and len(still["history"]) == 1


def test_ask_keeps_the_task_waiting(http: httpx.Client) -> None:
    task = send(http, message("draft", skill="approval-gated"))
    asked = send(http, message(data={"action": "ask", "question": "why?"}, task_id=task["id"]))
    assert asked["status"]["state"] == "input-required" and len(asked["history"]) == 2
    assert send(http, message(data={"action": "accept"}, task_id=task["id"]))["status"]["state"] == "completed"


def test_clarification_replies_by_text_or_answers(http: httpx.Client) -> None:
    task = send(http, message(skill="clarification-gated"))
    assert task["status"]["state"] == "input-required"
    interrupt = task["metadata"]["openwop"]["interrupt"]
    assert interrupt["kind"] == "clarification" and interrupt["questions"][0]["id"] == "q1"
    assert task_record(http, task["id"])["interruptKind"] == "clarification"
    done = send(http, message("blue", task_id=task["id"]))
    assert done["status"]["state"] == "completed"
    assert done["artifacts"][0]["parts"][0] == {"kind": "text", "text": "blue"}
    other = send(http, message(skill="clarification-gated"))
    unknown = error(http, "message/send", {"message": message(data={"answers": {"q9": "x"}}, task_id=other["id"])})
    assert unknown["code"] == -32602 and "q9" in unknown["message"]
    answered = send(http, message(data={"answers": [{"id": "q1", "answer": "red"}]}, task_id=other["id"]))
    assert answered["artifacts"][0]["parts"][-1]["data"] == {"color": "red"}


def test_failed_task_carries_the_error(http: httpx.Client) -> None:
    task = send(http, message(skill="always-fails"))
    assert task["status"]["state"] == "failed"
    status_message = task["status"]["message"]
    assert status_message["role"] == "agent"
    assert status_message["parts"][0]["text"] == "the node failed on purpose"
    assert task["metadata"]["openwop"]["error"]["code"] == "boom"
    assert task_record(http, task["id"])["state"] == "failed"


def test_cancel_is_working_while_cancelling_then_canceled(http: httpx.Client) -> None:
    waiting = send(http, message("draft", skill="approval-gated"))
    cancelled = result(http, "tasks/cancel", {"id": waiting["id"]})
    assert cancelled["status"]["state"] == "canceled"
    assert task_record(http, waiting["id"])["state"] == "canceled"
    assert error(http, "tasks/cancel", {"id": waiting["id"]})["code"] == -32002
    running = send(http, message(skill="slow"), blocking=False)
    wait_state(http, running["id"], "working")
    response = result(http, "tasks/cancel", {"id": running["id"]})
    assert response["status"]["state"] in ("working", "canceled")
    assert wait_state(http, running["id"], "canceled")["metadata"]["openwop"]["runStatus"] == "cancelled"


@pytest.mark.parametrize("path", ["/v1/a2a/tasks", "/v1/host/sample/a2a/tasks"])
def test_tenants_cannot_see_each_others_tasks(host: Host, http: httpx.Client, other_tenant_key: str, path: str) -> None:
    mine = send(http, message("draft", skill="approval-gated"))
    task_record(http, mine["id"], path=path)
    with host.client(other_tenant_key) as theirs:
        for method, params in (
            ("tasks/get", {"id": mine["id"]}),
            ("tasks/cancel", {"id": mine["id"]}),
            ("message/send", {"message": message(data={"action": "accept"}, task_id=mine["id"])}),
        ):
            refused = error(theirs, method, params)
            unknown = error(
                theirs,
                method,
                {**params, "id": "run_nope"}
                if "id" in params
                else {"message": message(data={"action": "accept"}, task_id="run_nope")},
            )
            assert refused["code"] == unknown["code"] == -32001
            assert refused["message"].replace(mine["id"], "ID") == unknown["message"].replace("run_nope", "ID"), (
                "indistinguishable"
            )
        assert theirs.get(f"{path}/{mine['id']}").status_code == 404
        assert theirs.get(f"{path}/run_nope").status_code == 404
    assert get_task(http, mine["id"])["status"]["state"] == "input-required"


def test_racing_replies_decide_once(host: Host, key: str, http: httpx.Client) -> None:
    task = send(http, message("draft", skill="approval-gated"))
    barrier = threading.Barrier(4)
    answers: list[dict[str, object]] = []

    def reply(message_id: str, action: str) -> None:
        with host.client(key) as client:
            barrier.wait()
            body = {
                "message": message(data={"action": action}, task_id=task["id"], message_id=message_id),
                "configuration": {"blocking": False},
            }
            answers.append(rpc(client, "message/send", body))

    threads = [
        threading.Thread(target=reply, args=args)
        for args in (("same", "accept"), ("same", "accept"), ("other-1", "reject"), ("other-2", "reject"))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 4
    refused = [a for a in answers if "error" in a]
    assert all(a["error"]["code"] == -32004 for a in refused)  # type: ignore[index]
    received = [e for e in run_events(http, task["id"]) if e["type"] == "approval.received"]
    assert len(received) == 1
    winner = "same" if received[0]["payload"]["action"] == "accept" else None
    history = [m["messageId"] for m in wait_state(http, task["id"], "completed")["history"]]
    assert len(history) == 2 and history[0] == task["history"][0]["messageId"]
    if winner == "same":
        assert len(refused) == 2, "both copies of the winning message succeed; the other two lose"
