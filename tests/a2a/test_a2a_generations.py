"""Task generations (A2A 1.1 draft), served to callers that send ``A2A-Version: 1.1``.

A generation is 1 when the task is born and grows by exactly one per update (state,
artifact or progress report); every update carries the generation after it. It is a fold
of the durable log, so it is the same after a restart and on every host; a re-attachment
resumes after any update with nothing missed or repeated; ``GetTask`` with
``currentGeneration`` waits for the task to move; a follow-up whose ``ifGenerationMatch``
is stale is refused with -32010 and changes nothing. 1.0 callers never see the field.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from a2a_wire import run_events, stream
from a2a_wire10 import Frame10, iter_stream10, post10, result10, stream10, user10
from backends import Hosts
from harness import HostProcess, wait_until
from inproc import InProcessHost

V11 = {"A2A-Version": "1.1"}


def _get11(http: httpx.Client, task_id: str, **params: Any) -> dict[str, Any]:
    body = post10(http, "GetTask", {"id": task_id, **params}, version="1.1").json()
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def _generation(frame: Frame10) -> int:
    return int(frame.result[frame.member]["generation"])


def _accept(task_id: str) -> dict[str, Any]:
    return {**user10("ok"), "taskId": task_id, "parts": [{"data": {"action": "accept"}}]}


def test_every_update_is_one_generation_more_and_the_task_agrees(http: httpx.Client) -> None:
    frames = stream10(http, "SendStreamingMessage", {"message": user10("go", skill="multi-step")}, headers=V11)
    generations = [_generation(f) for f in frames]
    assert generations == list(range(generations[0], generations[0] + len(frames))), "exactly +1 per update"
    assert len(set(generations)) == len(generations), "no two updates share a generation"
    task_id = frames[0].result["task"]["id"]
    final = _get11(http, task_id)
    assert final["status"]["state"] == "TASK_STATE_COMPLETED" and int(final["generation"]) == generations[-1]

    # from birth: a replay of the whole log starts at 1 and ends where the task is
    gated = result10(http, "SendMessage", {"message": user10("draft", skill="approval-gated")}, version="1.1")["task"]
    born_to_now = int(gated["generation"])
    whole = stream10(
        http,
        "SubscribeToTask",
        {"id": gated["id"]},
        headers={**V11, "Last-Event-ID": "-1"},
        until=lambda frames: len(frames) == born_to_now,
    )
    assert [_generation(f) for f in whole] == list(range(1, born_to_now + 1))


def test_1_0_callers_never_see_generations(http: httpx.Client) -> None:
    sent = result10(http, "SendMessage", {"message": user10("hi", skill="echo")})["task"]
    assert "generation" not in sent
    assert "generation" not in result10(http, "GetTask", {"id": sent["id"]})
    frames = stream10(http, "SendStreamingMessage", {"message": user10("go", skill="multi-step")})
    assert all("generation" not in f.result[f.member] for f in frames)


def test_a_re_attachment_resumes_after_any_generation_without_gap_or_repeat(http: httpx.Client) -> None:
    gated = result10(http, "SendMessage", {"message": user10("draft", skill="approval-gated")}, version="1.1")["task"]
    task_id = gated["id"]
    full: list[Frame10] = []

    def watch() -> None:
        for frame in iter_stream10(http, "SubscribeToTask", {"id": task_id}, headers=V11):
            full.append(frame)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    wait_until(lambda: full, what="the subscription's first frame")
    result10(http, "SendMessage", {"message": _accept(task_id)}, version="1.1")
    watcher.join(timeout=30)
    assert not watcher.is_alive()
    updates = full[1:]
    assert [_generation(f) for f in updates] == list(range(int(gated["generation"]) + 1, _generation(full[-1]) + 1))
    # resume after each update that names its event: exactly the rest, by 1.1 and by 0.3 cursors alike
    for index, frame in enumerate(updates[:-1]):
        if frame.id is None:
            continue
        rest = [(f.member, _generation(f)) for f in updates[index + 1 :]]
        resumed = stream10(http, "SubscribeToTask", {"id": task_id}, headers={**V11, "Last-Event-ID": str(frame.id)})
        assert [(f.member, _generation(f)) for f in resumed] == rest
        legacy = stream(http, "tasks/resubscribe", {"id": task_id, "metadata": {"lastSequence": frame.id}})
        assert len(legacy) == len(rest)


def test_get_task_waits_for_the_task_to_move_past_a_generation(http: httpx.Client) -> None:
    gated = result10(http, "SendMessage", {"message": user10("draft", skill="approval-gated")}, version="1.1")["task"]
    known = int(gated["generation"])
    answered: list[dict[str, Any]] = []
    poller = threading.Thread(
        target=lambda: answered.append(_get11(http, gated["id"], currentGeneration=str(known))), daemon=True
    )
    poller.start()
    poller.join(timeout=0.5)
    assert poller.is_alive() and not answered, "nothing moved: the answer is held"
    result10(http, "SendMessage", {"message": _accept(gated["id"])}, version="1.1")
    poller.join(timeout=30)
    assert answered and int(answered[0]["generation"]) > known
    # a generation already passed answers at once
    assert int(_get11(http, gated["id"], currentGeneration=str(known - 1))["generation"]) > known


def test_a_held_get_task_answers_when_its_wait_runs_out(start_host: Hosts[InProcessHost]) -> None:
    host = start_host("--a2a-request-timeout", "1")
    assert host.dev_key
    http = host.http(host.dev_key)
    gated = result10(http, "SendMessage", {"message": user10("draft", skill="approval-gated")}, version="1.1")["task"]
    held = _get11(http, gated["id"], currentGeneration=gated["generation"])
    assert held["generation"] == gated["generation"] and held["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_a_stale_if_generation_match_is_refused_and_writes_nothing(http: httpx.Client) -> None:
    gated = result10(http, "SendMessage", {"message": user10("draft", skill="approval-gated")}, version="1.1")["task"]
    task_id, current = gated["id"], int(gated["generation"])
    before = run_events(http, task_id)
    stale = {"message": _accept(task_id), "configuration": {"ifGenerationMatch": str(current - 1)}}
    refused = post10(http, "SendMessage", stale, version="1.1").json()["error"]
    assert refused["code"] == -32010
    info = refused["data"][0]
    assert info["reason"] == "TASK_GENERATION_MISMATCH" and info["domain"] == "a2a-protocol.org"
    assert info["metadata"] == {
        "taskId": task_id,
        "expectedGeneration": str(current - 1),
        "currentGeneration": str(current),
    }
    assert run_events(http, task_id) == before, "a refused follow-up writes nothing"
    after = _get11(http, task_id)
    assert after["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and len(after["history"]) == len(gated["history"])
    matching = {"message": _accept(task_id), "configuration": {"ifGenerationMatch": current}}
    done = result10(http, "SendMessage", matching, version="1.1")["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED" and int(done["generation"]) > current
    # ignored on a message that starts a task
    fresh = {"message": user10("hi", skill="echo"), "configuration": {"ifGenerationMatch": "99"}}
    assert result10(http, "SendMessage", fresh, version="1.1")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.process  # killed and restarted
def test_a_generation_is_the_same_after_a_restart(host: HostProcess, key: str) -> None:
    http = host.http(key)
    gated = result10(http, "SendMessage", {"message": user10("draft", skill="approval-gated")}, version="1.1")["task"]
    host.kill()
    host.start()
    again = _get11(host.http(key), gated["id"])
    assert again["generation"] == gated["generation"]
    done = result10(host.http(key), "SendMessage", {"message": _accept(gated["id"])}, version="1.1")["task"]
    assert int(done["generation"]) > int(gated["generation"])
