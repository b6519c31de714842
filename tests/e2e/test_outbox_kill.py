"""A real ``tether serve`` SIGKILLed while its outbox drains loses no delivery, and the stable
``webhook-id`` of each delivery lets the receiver drop the ones it sees twice; a kill sends
again only about as many as were in flight to the receiver (``--delivery-concurrency``)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from backends import Hosts
from harness import HostProcess, wait_until
from openwop_client import OpenwopClient
from openwop_client.types import CreateRunRequest, RegisterWebhookRequest
from receiver import Received, Receiver, egress_to

RUNS = 40


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    rx = Receiver(trustme.CA(), tmp_path, keep_alive=True)

    def slow(received: Received) -> tuple[int, dict[str, str]]:
        time.sleep(0.05)  # slow enough that the drain is still going when the host dies
        return 204, {}

    rx.script = slow
    yield rx.start()
    rx.stop()


def test_sigkill_mid_drain_loses_nothing_and_ids_deduplicate(
    start_process: Hosts[HostProcess], receiver: Receiver
) -> None:
    host = start_process("--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-bundle", str(receiver.ca_file))
    assert host.dev_key
    client = OpenwopClient(host.url, host.dev_key)
    client.webhooks_register(RegisterWebhookRequest(url=receiver.url("/hook"), events=["run.completed"]))
    runs = {
        client.runs_create(CreateRunRequest(workflowId="echo", inputs={"prompt": str(i)})).runId for i in range(RUNS)
    }
    wait_until(lambda: len(receiver.requests) >= 1, what="the drain to start")
    host.kill()
    seen_before_the_kill = len(receiver.requests)
    host.restart()

    def distinct_ids() -> dict[str, bytes]:
        return {r.headers["webhook-id"]: r.body for r in list(receiver.requests)}

    wait_until(lambda: len(distinct_ids()) == RUNS, timeout=60, what=f"{RUNS} distinct deliveries")
    assert seen_before_the_kill < RUNS, "the host died before the drain ended"
    by_id: dict[str, set[bytes]] = {}
    for request in receiver.requests:
        by_id.setdefault(request.headers["webhook-id"], set()).add(request.body)
    assert all(len(bodies) == 1 for bodies in by_id.values()), "a delivery sent twice carries the same id and body"
    deduplicated = [next(iter(bodies)) for bodies in by_id.values()]
    assert {_run_id(body) for body in deduplicated} == runs  # every run's completion, once after de-duplication


def _run_id(body: bytes) -> str:
    value: str = json.loads(body)["runId"]
    return value


#: the crash load of the re-delivery test: runs, webhooks on each, kills, receipts per life
CRASH_RUNS, CRASH_HOOKS, KILLS, RECEIPTS_PER_LIFE = 200, 4, 6, 60
#: deliveries in flight at once to the receiver (``--delivery-concurrency``)
IN_FLIGHT = 1
#: what a kill may send again, on average: what was in flight; on PostgreSQL also about one
#: receipt whose transaction had not reached the server's commit yet
RESENT_PER_KILL = {"sqlite": IN_FLIGHT, "postgres": IN_FLIGHT + 1}


def test_a_kill_sends_again_only_what_was_in_flight(start_process: Hosts[HostProcess], receiver: Receiver) -> None:
    """SIGKILL while the outbox drains a backlog, four times, each once the receiver has taken
    more deliveries: every delivery arrives, each id with one body, and a kill re-sends about
    as many as were in flight to the receiver. Receipts that waited in memory (or in the
    writer's queue) for earlier writes to commit made each kill re-send several times that."""
    backlog = threading.Event()  # the receiver holds its first answers until the backlog is there

    def answer(received: Received) -> tuple[int, dict[str, str]]:
        assert backlog.wait(60)
        return 204, {}  # then at once: what a kill re-sends is down to the host

    receiver.script = answer
    host = start_process(*egress_to(receiver), "--delivery-concurrency", str(IN_FLIGHT))
    assert host.dev_key
    client = OpenwopClient(host.url, host.dev_key)
    try:
        for i in range(CRASH_HOOKS):
            client.webhooks_register(RegisterWebhookRequest(url=receiver.url(f"/hook/{i}"), events=["run.completed"]))
        for i in range(CRASH_RUNS):
            client.runs_create(CreateRunRequest(workflowId="echo", inputs={"prompt": str(i)}))
    finally:
        backlog.set()
    expected = CRASH_RUNS * CRASH_HOOKS
    for _ in range(KILLS):
        target = len(receiver.requests) + RECEIPTS_PER_LIFE
        wait_until(lambda: len(receiver.requests) >= target, timeout=60, what=f"{target} receipts")  # noqa: B023
        assert len({r.headers["webhook-id"] for r in list(receiver.requests)}) < expected, "drained before a kill"
        host.restart()  # SIGKILL, with deliveries in flight, then the same store again
    wait_until(
        lambda: len({r.headers["webhook-id"] for r in list(receiver.requests)}) == expected,
        timeout=120,
        what=f"{expected} distinct deliveries",
    )
    bodies: dict[str, set[bytes]] = {}
    for request in list(receiver.requests):
        bodies.setdefault(request.headers["webhook-id"], set()).add(request.body)
    assert all(len(b) == 1 for b in bodies.values()), "a delivery sent again carries the same id and body"
    per_hook = Counter(request.path for request in list(receiver.requests))
    assert set(per_hook) == {f"/hook/{i}" for i in range(CRASH_HOOKS)}
    resent = len(receiver.requests) - expected
    assert resent / KILLS <= RESENT_PER_KILL[start_process.backend], f"{resent} sent again over {KILLS} kills"
