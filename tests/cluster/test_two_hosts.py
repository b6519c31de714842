"""Two hosts, one PostgreSQL database: any host serves any task, and a dead host's runs
are taken over with nothing executed, written or pushed twice.

The hosts are ``tether serve`` processes where one is killed, in-process hosts otherwise
(each with its own app, caches and connections, sharing only the database).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from a2a_wire import WORKFLOWS, get_task, message, open_stream, run_events, send, wait_state
from backends import Hosts
from harness import Host, HostProcess, wait_until
from inproc import InProcessHost
from receiver import Receiver

LEASE = "2"


def _pair(
    start: Hosts[HostProcess] | Hosts[InProcessHost], shared_database: str, folder: Path, *extra: str
) -> tuple[Host, Host, str]:
    """Two hosts on one database, sharing the host key as operators must."""
    args = (
        "--workflows",
        str(WORKFLOWS),
        "--lease-seconds",
        LEASE,
        "--fallback-poll-seconds",
        "1",
        "--secret-key-file",
        str(folder / "shared-host.key"),
        *extra,
    )
    one = start(*args, name="one", database_url=shared_database)
    two = start(*args, name="two", database_url=shared_database)
    key = one.dev_key
    assert key is not None, "the first host on a fresh database makes the dev key"
    assert two.dev_key is None, "the second host shares the first one's keys"
    return one, two, key


def _watch(host: Host, key: str, task_id: str, into: list[Any]) -> threading.Thread:
    def run() -> None:
        with host.client(key) as http:
            with open_stream(http, "tasks/resubscribe", {"id": task_id}) as frames:
                for frame in frames:
                    into.append(frame)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _assert_clean(events: list[dict[str, Any]]) -> None:
    assert [e["sequence"] for e in events] == list(range(len(events)))
    assert Counter(e["type"] for e in events)["run.started"] == 1
    for kind in ("node.started", "node.completed"):
        per_node = Counter(e["nodeId"] for e in events if e["type"] == kind)
        assert all(n == 1 for n in per_node.values()), f"{kind} twice: {per_node}"


def test_create_on_one_resubscribe_and_approve_on_two(
    start_host: Hosts[InProcessHost], shared_database: str, tmp_path: Path
) -> None:
    one, two, key = _pair(start_host, shared_database, tmp_path)
    task = send(one.http(key), message("draft", skill="approval-gated"), blocking=True)
    assert task["status"]["state"] == "input-required"
    seen_one: list[Any] = []
    seen_two: list[Any] = []
    watchers = [_watch(one, key, task["id"], seen_one), _watch(two, key, task["id"], seen_two)]
    wait_until(lambda: seen_one and seen_two, what="both streams to attach")
    reply = send(two.http(key), message(data={"action": "accept"}, task_id=task["id"]))
    assert reply["status"]["state"] == "completed"
    for watcher in watchers:
        watcher.join(15)
        assert not watcher.is_alive(), "a resubscribe stream ends at the terminal state"

    def updates(frames: list[Any]) -> list[str]:
        return [json.dumps(f.result, sort_keys=True) for f in frames[1:]]  # after the current Task

    assert updates(seen_one) == updates(seen_two) and updates(seen_one), "both hosts streamed the same events"
    assert seen_one[-1].state == "completed"
    _assert_clean(run_events(one.http(key), task["id"]))


def test_sigkill_mid_run_is_taken_over_once(
    start_process: Hosts[HostProcess], shared_database: str, receiver: Receiver, tmp_path: Path
) -> None:
    one, two, key = _pair(
        start_process,
        shared_database,
        tmp_path,
        "--egress-allow-cidr",
        "127.0.0.1/32",
        "--egress-ca-bundle",
        str(receiver.ca_file),
    )
    config = {"url": receiver.url(), "token": "t-123"}
    task = send(one.http(key), message("x", skill="slow"), blocking=False, pushNotificationConfig=config)
    wait_until(
        lambda: any(
            e["type"] == "node.started" and e.get("payload", {}).get("wakeAt")
            for e in run_events(two.http(key), task["id"])
        ),
        what="the delay to start on host one",
    )
    one.kill()
    done = wait_state(two.http(key), task["id"], "completed", timeout=30)
    assert done["status"]["state"] == "completed"
    events = run_events(two.http(key), task["id"])
    _assert_clean(events)
    wait_until(lambda: receiver.requests, what="the completed push")
    wait_until(
        lambda: two.http(key).get("/v1/deliveries", params={"status": "delivered"}).json()["deliveries"],
        what="the delivery record",
    )
    states = [json.loads(r.body)["status"]["state"] for r in receiver.requests]
    assert states == ["completed"], "one push, once"


def test_a_reply_through_one_host_is_never_read_older_through_the_other(
    start_host: Hosts[InProcessHost], shared_database: str, tmp_path: Path
) -> None:
    """Read-your-writes across hosts, under concurrent writes: each client answers its task's
    gate through host one and at once reads it through host two, which has read (and holds)
    the task while it waited; the hint host one sends after its commit may come later."""
    one, two, key = _pair(start_host, shared_database, tmp_path)
    tasks = [send(one.http(key), message(f"draft {i}", skill="approval-gated"))["id"] for i in range(8)]
    for task_id in tasks:
        assert get_task(two.http(key), task_id)["status"]["state"] == "input-required"
    stale: list[str] = []

    def answer_then_read(task_id: str) -> None:
        with one.client(key) as writer, two.client(key) as reader:
            done = send(writer, message(data={"action": "accept"}, task_id=task_id))
            assert done["status"]["state"] == "completed"
            seen = get_task(reader, task_id, historyLength=10)
            if seen["status"]["state"] != "completed" or len(seen.get("history", [])) != len(done.get("history", [])):
                stale.append(f"{task_id}: read {seen['status']['state']} after writing completed")

    threads = [threading.Thread(target=answer_then_read, args=(task_id,)) for task_id in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert stale == []
