"""A real ``tether serve`` SIGKILLed while its outbox drains loses no delivery, and the stable
``webhook-id`` of each delivery lets the receiver drop the ones it sees twice."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from backends import Hosts
from harness import HostProcess, wait_until
from openwop_client import OpenwopClient
from openwop_client.types import CreateRunRequest, RegisterWebhookRequest
from receiver import Received, Receiver

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
