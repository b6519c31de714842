"""The effect seams (``--enable-test-seams``) in the shapes the suite's scenarios drive them.

``effect-retry`` (v2-effect-identity-business-key): one effect, two attempts in the ledger
under one keying and provider key, and that key on the wire twice. ``effect-seams/fire``
(v2-effect-seam-no-refire): the fired row's attempt is in the ledger when the seam answers.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trustme
from backends import suite_host
from harness import Host
from receiver import Received, Receiver, egress_to
from v2_wire import project, wait_status

from tether.engine.effects import CALLBACK, HANDOFF_SEND, SEAMS
from tether.openwop.v2.effect_seams import effect_seams_router

PREFIX = "/conformance/seams/sample"


class FailFirst:
    """The receiver's script: the first request to each path answers 503, the next ones 204."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, received: Received) -> tuple[int, dict[str, str]]:
        with self._lock:
            first = received.path not in self._seen
            self._seen.add(received.path)
        return (503 if first and received.path.startswith("/flaky/") else 204), {}


@pytest.fixture(scope="module")
def rx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    receiver = Receiver(trustme.CA(), tmp_path_factory.mktemp("receiver"))
    receiver.script = FailFirst()
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str, rx: Receiver) -> Host:
    return suite_host(request, "--enable-test-seams", *egress_to(rx))


def _ledger(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    answer = http.get(f"/runs/{project(run_id)}/effects")
    assert answer.status_code == 200, answer.text
    effects: list[dict[str, Any]] = answer.json()["effects"]
    return effects


def _at(rx: Receiver, path: str) -> list[Received]:
    return [r for r in list(rx.requests) if r.path == path]


def test_effect_retry_is_one_effect_two_attempts_one_key_in_the_ledger_and_on_the_wire(
    http: httpx.Client, rx: Receiver
) -> None:
    path = f"/flaky/{uuid.uuid4().hex}"
    answer = http.post(f"{PREFIX}/test/idempotency/effect-retry", json={"providerUrl": rx.url(path)})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert set(body) == {"runId", "effectId"}
    attempts = [e for e in _ledger(http, body["runId"]) if e["effectId"] == body["effectId"]]
    assert [(a["attempt"], a["state"]) for a in attempts] == [(1, "released"), (2, "completed")]
    assert {(a["keying"], a["providerKey"]) for a in attempts} == {("activity-recipe", attempts[0]["providerKey"])}
    wire = {r.headers.get("idempotency-key") for r in _at(rx, path)}
    assert len(_at(rx, path)) == 2 and wire == {attempts[0]["providerKey"]}, wire


def test_fire_answers_once_the_rows_attempt_is_in_the_ledger_then_the_run_completes(
    http: httpx.Client, rx: Receiver
) -> None:
    assert SEAMS[0].seam == CALLBACK, "the suite fires the manifest's first row"
    path = f"/fired/{uuid.uuid4().hex}"
    answer = http.post(f"{PREFIX}/effect-seams/fire", json={"seam": CALLBACK, "receiverUrl": rx.url(path)})
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["runId"]
    [effect] = _ledger(http, run_id)
    assert (effect["nodeId"], effect["attempt"], effect["state"]) == ("gate", 1, "completed")
    [received] = _at(rx, path)
    assert received.headers["idempotency-key"] == effect["providerKey"]
    wait_status(http, run_id, "completed")


def test_fire_without_a_receiver_records_its_attempt_all_the_same(http: httpx.Client) -> None:
    answer = http.post(f"{PREFIX}/effect-seams/fire", json={"seam": CALLBACK})
    assert answer.status_code == 201, answer.text
    assert len(_ledger(http, answer.json()["runId"])) == 1


def test_a_row_it_cannot_fire_and_a_bad_body_are_refused_by_name(http: httpx.Client) -> None:
    """Seams are no protocol responses (no ``OpenWOP-Version``), but refuse in the host's envelope all the same."""
    fire, retry = f"{PREFIX}/effect-seams/fire", f"{PREFIX}/test/idempotency/effect-retry"
    bodies = [
        (fire, {"seam": "probe"}),
        (fire, {"seam": HANDOFF_SEND}),
        (fire, {"seam": CALLBACK, "x": 1}),
        (retry, {}),
    ]
    for path, body in bodies:
        answer = http.post(path, json=body)
        assert (answer.status_code, answer.json()["error"]) == (400, "validation_error"), answer.text
        assert answer.json()["message"], "a message a person can act on"
    assert effect_seams_router(False).routes == [], "mounted only with --enable-test-seams"


def test_a_replay_fork_of_a_fired_run_records_no_attempt_its_source_did_not_make(
    http: httpx.Client, rx: Receiver
) -> None:
    """v2-effect-seam-no-refire's witness: fire, fork in replay mode, compare the two ledgers (and the wire)."""
    path = f"/fired/{uuid.uuid4().hex}"
    fired = http.post(f"{PREFIX}/effect-seams/fire", json={"seam": CALLBACK, "receiverUrl": rx.url(path)})
    assert fired.status_code == 201, fired.text
    parent = fired.json()["runId"]
    wait_status(http, parent, "completed")
    forked = http.post(f"/runs/{project(parent)}:fork", json={"mode": "replay"})
    assert forked.status_code == 201, forked.text
    fork = forked.json()["runId"]
    wait_status(http, fork, "completed", "failed")
    seen = {(e["nodeId"], e["attempt"], e["at"]) for e in _ledger(http, parent)}
    assert seen, "the source recorded its attempt"
    assert [e for e in _ledger(http, fork) if (e["nodeId"], e["attempt"], e["at"]) not in seen] == []
    assert len(_at(rx, path)) == 1, "the callback went out once"
