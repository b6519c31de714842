"""The delivery worker against a real SQLite store and a scripted receiver (MockTransport)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import httpx
import orjson
import pytest
import trustme
from receiver import Receiver

from tether import clock
from tether.egress.guard import EgressGuard, EgressPolicy
from tether.egress.outbox import OutboxWorker, RetrySchedule
from tether.egress.transport import build_egress_client, make_ssl_context
from tether.secrets import SecretBox
from tether.store.base import Attempt, Commit, EventRow, Fanout, PushConfigRow, RunRow, WebhookRow
from tether.store.fanout import push_stream_task
from tether.store.sqlite import SqliteStore

BOX = SecretBox(b"k" * 32)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "t.db") as s:
        yield s


async def _enqueue_push(store: SqliteStore, task_id: str, seq: int, final: bool = False) -> None:
    now = clock.now_iso()
    run = RunRow(task_id, "default", "echo", "running", seq, {}, now, now)
    await store.commit(
        Commit(
            run=run,
            events=[EventRow(task_id, seq, b"{}")],
            expected_sequence=seq - 1,
            extras=[
                Fanout(
                    kind="a2a-push",
                    tenant="default",
                    run_id=task_id,
                    sequence=seq,
                    body=orjson.dumps({"seq": seq}),
                    task_id=task_id,
                    final=final,
                )
            ],
        )
    )


async def _push_config(
    store: SqliteStore, task_id: str, config_id: str = "c1", token: str | None = "tok-secret"
) -> None:
    await store.put_push_config(
        PushConfigRow(
            task_id,
            config_id,
            "default",
            "https://receiver.test/push",
            BOX.fingerprint(token) if token else None,
            BOX.seal(token, context=f"push-token:{config_id}") if token else None,
            ["Bearer"],
            BOX.seal("cred-secret", context=f"push-auth:{config_id}"),
            clock.now_iso(),
        )
    )


def _worker(
    store: SqliteStore, handler: Callable[[httpx.Request], httpx.Response], schedule: str = "10ms,10ms"
) -> OutboxWorker:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)
    return OutboxWorker(store, client, BOX, RetrySchedule.parse(schedule))


async def _drain(worker: OutboxWorker, until: Callable[[], Awaitable[bool]]) -> None:
    """Run the worker until ``until()`` holds (or fail after 5 s), then stop it and its client."""
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(500):
            if await until():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the outbox did not settle")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await worker.client.aclose()


def _dead(store: SqliteStore) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return bool(await store.list_deliveries(None, "dead"))

    return probe


def _count(items: list[object], n: int) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return len(items) == n

    return probe


async def test_pushes_in_order_with_credentials_then_discards_them(store: SqliteStore) -> None:
    await store.commit(
        Commit(
            run=RunRow("t1", "default", "echo", "running", -1, {}, clock.now_iso(), clock.now_iso()),
            events=[],
            expected_sequence=None,
        )
    )
    await _push_config(store, "t1")
    for seq in (0, 1):
        await _enqueue_push(store, "t1", seq, final=(seq == 1))
    received: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        received.append(request)
        return httpx.Response(204)

    worker = _worker(store, handler)
    await _drain(worker, _count(received, 2))
    assert [orjson.loads(r.content)["seq"] for r in received] == [0, 1]
    assert received[0].headers["X-A2A-Notification-Token"] == "tok-secret"
    assert received[0].headers["Authorization"] == "Bearer cred-secret"
    assert received[0].headers["webhook-id"] != received[1].headers["webhook-id"]
    await asyncio.sleep(0.05)
    config = (await store.list_push_configs("t1"))[0]
    assert config.token_secret is None and config.auth_secret is None, "credentials go once the final push is done"


async def test_retries_on_the_ladder_then_dead_letters(store: SqliteStore) -> None:
    await store.commit(
        Commit(
            run=RunRow("t2", "default", "echo", "running", -1, {}, clock.now_iso(), clock.now_iso()),
            events=[],
            expected_sequence=None,
        )
    )
    await _push_config(store, "t2")
    await _enqueue_push(store, "t2", 0)
    ids: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        ids.append(request.headers["webhook-id"])
        return httpx.Response(503)

    worker = _worker(store, handler, "10ms,20ms")
    await _drain(worker, _dead(store))
    assert len(ids) == 3, "one attempt plus one per ladder step"
    assert len(set(ids)) == 1, "the webhook-id stays the same across retries"
    row = (await store.list_deliveries(None, "dead"))[0]
    assert row.attempts == 3 and row.last_error == "HTTP 503"
    assert await store.redeliver(row.delivery_id, "default", clock.now_iso())
    assert (await store.list_deliveries(None, "pending"))[0].delivery_id == row.delivery_id


@pytest.mark.parametrize(("status", "attempts"), [(400, 1), (302, 3), (429, 3)])
async def test_which_answers_are_retried(store: SqliteStore, status: int, attempts: int) -> None:
    await store.commit(
        Commit(
            run=RunRow("t3", "default", "echo", "running", -1, {}, clock.now_iso(), clock.now_iso()),
            events=[],
            expected_sequence=None,
        )
    )
    await _push_config(store, "t3")
    await _enqueue_push(store, "t3", 0)
    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(1)
        return httpx.Response(status, headers={"Location": "https://elsewhere.test/"} if status == 302 else {})

    worker = _worker(store, handler)
    await _drain(worker, _dead(store))
    assert len(seen) == attempts


async def test_webhook_fanout_matches_events_and_signs(store: SqliteStore) -> None:
    from openwop_client.webhook_helpers import read_webhook_headers, verify_webhook_signature

    secret = "s" * 64
    await store.put_webhook(
        WebhookRow(
            "wh_1",
            "default",
            "https://hooks.test/x",
            ["run.completed"],
            [],
            BOX.seal(secret, context="webhook:wh_1"),
            BOX.fingerprint(secret),
            clock.now_iso(),
        )
    )
    await store.put_webhook(
        WebhookRow(
            "wh_2",
            "other",
            "https://hooks.test/y",
            ["run.completed"],
            [],
            BOX.seal(secret, context="webhook:wh_2"),
            BOX.fingerprint(secret),
            clock.now_iso(),
        )
    )
    now = clock.now_iso()
    for seq, kind in enumerate(["run.started", "run.completed"]):
        body = orjson.dumps({"runId": "r1", "workspaceId": "default", "event": {"type": kind, "sequence": seq}})
        await store.commit(
            Commit(
                run=RunRow("r1", "default", "echo", "running", seq, {}, now, now),
                events=[EventRow("r1", seq, b"{}")],
                expected_sequence=None if seq == 0 else seq - 1,
                extras=[
                    Fanout(kind="webhook", tenant="default", run_id="r1", sequence=seq, body=body, event_type=kind)
                ],
            )
        )
    received: list[httpx.Request] = []
    worker = _worker(store, lambda r: (received.append(r), httpx.Response(200))[1])
    await _drain(worker, _count(received, 1))
    request = received[0]
    assert request.url.host == "hooks.test"
    assert orjson.loads(request.content)["event"]["type"] == "run.completed"
    found = read_webhook_headers(dict(request.headers))
    assert found is not None
    signature, timestamp = found[0], found[1]
    assert verify_webhook_signature(secret, signature, timestamp, request.content).valid
    assert verify_webhook_signature(
        secret, request.headers["X-openwop-Signature"], request.headers["X-openwop-Timestamp"], request.content
    ).valid


async def _hooked_run(store: SqliteStore, hook_id: str, run_id: str) -> None:
    """A webhook subscribed to run.completed, and one run.completed delivery to it."""
    now = clock.now_iso()
    await store.put_webhook(
        WebhookRow(
            hook_id,
            "default",
            "https://hooks.test/v2",
            ["run.completed"],
            [],
            BOX.seal("s" * 64, context=f"webhook:{hook_id}"),
            BOX.fingerprint("s" * 64),
            now,
            2,
        )
    )
    body = orjson.dumps({"runId": run_id, "workspaceId": "default", "event": {"type": "run.completed", "sequence": 0}})
    await store.commit(
        Commit(
            run=RunRow(run_id, "default", "echo", "completed", 0, {}, now, now),
            events=[EventRow(run_id, 0, b"{}")],
            expected_sequence=None,
            extras=[Fanout("webhook", "default", run_id, 0, body, event_type="run.completed")],
        )
    )


async def test_a_webhook_delivery_is_rendered_signed_and_retried_as_its_subscription_says(store: SqliteStore) -> None:
    """The worker's ``webhook_body`` renders each delivery for its subscription: the body and the names it
    signs and sends, and a ladder of its own on which every failure, a 4xx too, is retried."""
    from openwop_client.webhook_helpers import verify_webhook_signature

    from tether.egress.outbox import WebhookDelivery

    await _hooked_run(store, "wh_v2", "r1")
    rendered: list[WebhookRow] = []

    def render(hook: WebhookRow, stored: bytes) -> WebhookDelivery:
        rendered.append(hook)
        body = orjson.dumps({"runId": f"default/{orjson.loads(stored)['runId']}", "event": {"type": "run.completed"}})
        return WebhookDelivery(body, f"default/{hook.webhook_id}", "run.completed", 2, RetrySchedule.parse("10ms,20ms"))

    received: list[httpx.Request] = []
    worker = _worker(store, lambda r: (received.append(r), httpx.Response(410))[1], schedule="1h")
    worker.webhook_body = render
    await _drain(worker, _dead(store))
    assert len(received) == 3, "a refusal is retried on the subscription's own ladder (not the host's 1 h, not final)"
    assert [hook.major for hook in rendered] == [2, 2, 2]
    request = received[-1]
    assert orjson.loads(request.content)["runId"] == "default/r1"
    for family in ("OpenWOP", "X-openwop"):
        assert request.headers[f"{family}-Webhook-Id"] == "default/wh_v2"
        assert request.headers[f"{family}-Event-Type"] == "run.completed"
        assert request.headers[f"{family}-Signature-Algorithm"] == "v1"
        assert verify_webhook_signature(
            "s" * 64, request.headers[f"{family}-Signature"], request.headers[f"{family}-Timestamp"], request.content
        ).valid
    [dead] = await store.list_deliveries(None, "dead")
    assert (dead.attempts, dead.last_error) == (3, "HTTP 410: the receiver refused the delivery")


def test_a_ladder_draws_each_delay_within_its_jitter() -> None:
    """The host's ladder spreads retries ±20 %; a ladder may ask for less (v2's ±10 %: its gaps must widen)."""
    host, narrow = RetrySchedule.parse("10s"), RetrySchedule((10.0,), jitter=0.1)
    host_draws = [host.delay(1) or 0.0 for _ in range(500)]
    narrow_draws = [narrow.delay(1) or 0.0 for _ in range(500)]
    assert 8.0 <= min(host_draws) and max(host_draws) <= 12.0
    assert 9.0 <= min(narrow_draws) and max(narrow_draws) <= 11.0
    assert host.delay(2) is None and narrow.delay(2) is None, "spent after its last delay"


async def test_a_delivery_its_subscription_cannot_render_is_dead_at_once(store: SqliteStore) -> None:
    from tether.egress.outbox import WebhookDelivery
    from tether.errors import TetherError

    await _hooked_run(store, "wh_v2", "r2")

    def unprojectable(hook: WebhookRow, stored: bytes) -> WebhookDelivery:
        raise TetherError("run.completed cannot carry 'extra'", code="payload_unprojectable")

    received: list[httpx.Request] = []
    worker = _worker(store, lambda r: (received.append(r), httpx.Response(204))[1])
    worker.webhook_body = unprojectable
    await _drain(worker, _dead(store))
    [dead] = await store.list_deliveries(None, "dead")
    assert received == [] and dead.attempts == 1
    assert dead.last_error == "payload_unprojectable: run.completed cannot carry 'extra'"


class _RebindingResolver:
    """Answers a public address first (registration), then a private one (delivery)."""

    def __init__(self) -> None:
        self.answers = [["93.184.216.34"], ["10.0.0.7"]]
        self.calls = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls += 1
        return self.answers[min(self.calls - 1, len(self.answers) - 1)]


class _NoDialBackend:
    """A network backend that records every dial: none may happen."""

    def __init__(self) -> None:
        self.dials: list[tuple[str, int]] = []

    async def connect_tcp(self, host: str, port: int, *args: object, **kwargs: object) -> object:
        self.dials.append((host, port))
        raise AssertionError("the outbox dialled a target the guard should have refused")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def test_dns_rebinding_sends_nothing(store: SqliteStore) -> None:
    from tether.egress.guard import EgressGuard, EgressPolicy
    from tether.egress.transport import build_egress_client

    resolver = _RebindingResolver()
    guard = EgressGuard(EgressPolicy(), resolver)
    await guard.resolve_and_check("https://rebind.example/push")  # registration: public, accepted
    backend = _NoDialBackend()
    client = build_egress_client(guard, network_backend=backend)  # type: ignore[arg-type]
    await store.commit(
        Commit(
            run=RunRow("t9", "default", "echo", "running", -1, {}, clock.now_iso(), clock.now_iso()),
            events=[],
            expected_sequence=None,
        )
    )
    await store.put_push_config(
        PushConfigRow("t9", "c1", "default", "https://rebind.example/push", None, None, [], None, clock.now_iso())
    )
    await _enqueue_push(store, "t9", 0)
    worker = OutboxWorker(store, client, BOX, RetrySchedule.parse("10ms"))
    await _drain(worker, _dead(store))
    dead = await store.list_deliveries(None, "dead")
    assert backend.dials == [], "nothing was sent to the rebound address"
    assert dead and "10.0.0.7" in (dead[0].last_error or "") and "egress guard" in (dead[0].last_error or "")
    assert resolver.calls == 3, "resolved again before every attempt"


async def test_a_secret_sealed_by_another_host_key_is_a_clear_dead_letter(store: SqliteStore) -> None:
    await store.commit(
        Commit(
            run=RunRow("t8", "default", "echo", "running", -1, {}, clock.now_iso(), clock.now_iso()),
            events=[],
            expected_sequence=None,
        )
    )
    await _push_config(store, "t8")  # sealed with BOX
    await _enqueue_push(store, "t8", 0)
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(204)))
    worker = OutboxWorker(store, client, SecretBox(b"another host key" * 2), RetrySchedule.parse("10ms"))
    await _drain(worker, _dead(store))
    dead = await store.list_deliveries(None, "dead")
    assert dead and "--secret-key-file" in (dead[0].last_error or "")


# --------------------------------------------------------------------------- the pipeline


async def _push_to(store: SqliteStore, task_id: str, url: str, pushes: int = 1) -> None:
    """A task with one push config at ``url`` and ``pushes`` pushes enqueued (sequences 1..n)."""
    now = clock.now_iso()
    await store.commit(
        Commit(RunRow(task_id, "default", "echo", "running", 0, {}, now, now), [], expected_sequence=None)
    )
    await store.put_push_config(PushConfigRow(task_id, "c1", "default", url, None, None, [], None, now))
    for seq in range(1, pushes + 1):
        await _enqueue_push(store, task_id, seq, final=seq == pushes)


async def test_per_task_order_holds_with_many_tasks_in_flight(store: SqliteStore) -> None:
    tasks, pushes = 24, 4
    received: dict[str, list[int]] = {}
    in_flight: set[str] = set()
    overlapped: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        task = request.url.path.rsplit("/", 1)[1]
        if task in in_flight:
            overlapped.append(task)
        in_flight.add(task)
        await asyncio.sleep(0.001 * (hash(request.headers["webhook-id"]) % 5))  # answers out of order
        in_flight.discard(task)
        received.setdefault(task, []).append(orjson.loads(request.content)["seq"])
        return httpx.Response(204)

    for i in range(tasks):
        await _push_to(store, f"t{i}", f"https://receiver.test/push/t{i}", pushes)
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)
    worker = OutboxWorker(store, client, BOX, RetrySchedule.parse("10ms"), concurrency=64)

    async def all_delivered() -> bool:
        return len(await store.list_deliveries(None, "delivered", limit=1000)) == tasks * pushes

    await _drain(worker, all_delivered)
    assert received == {f"t{i}": [1, 2, 3, 4] for i in range(tasks)}  # each task's pushes in sequence order
    assert overlapped == []  # and one at a time


async def test_a_hanging_destination_does_not_delay_a_live_one(store: SqliteStore) -> None:
    release = asyncio.Event()
    hanging: list[str] = []
    live: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "hanging.test":
            hanging.append(request.url.path)
            await release.wait()
        else:
            live.append(request.url.path)
        return httpx.Response(204)

    for i in range(100):  # enqueued first, so due first
        await _push_to(store, f"h{i}", f"https://hanging.test/push/h{i}")
    for i in range(20):
        await _push_to(store, f"l{i}", f"https://live.test/push/l{i}")
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)
    worker = OutboxWorker(store, client, BOX, RetrySchedule.parse("10ms"), concurrency=4, capacity=64)
    task = asyncio.create_task(worker.run())
    try:
        await _until(lambda: len(live) == 20)
        assert len(hanging) == 4  # the hanging receiver holds its own four slots, nothing more
        release.set()

        async def everything_delivered() -> bool:
            return len(await store.list_deliveries(None, "delivered", limit=1000)) == 120

        await _until_async(everything_delivered)
    finally:
        release.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.aclose()


async def test_a_failing_destination_backs_off_without_spending_its_deliveries(store: SqliteStore) -> None:
    failing: list[str] = []
    live: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "down.test":
            failing.append(request.url.path)
            return httpx.Response(503)
        live.append(request.url.path)
        return httpx.Response(204)

    for i in range(50):
        await _push_to(store, f"d{i}", f"https://down.test/push/d{i}")
    for i in range(10):
        await _push_to(store, f"l{i}", f"https://live.test/push/l{i}")
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)
    worker = OutboxWorker(store, client, BOX, RetrySchedule.parse("1h"), concurrency=2)

    async def live_delivered_and_down_put_off() -> bool:
        rows = await store.list_deliveries(None, None, limit=1000)
        down = [r for r in rows if "down.test" in r.url]
        return len(live) == 10 and all(r.attempts > 0 or r.next_attempt_at > r.created_at for r in down)

    await _drain(worker, live_delivered_and_down_put_off)
    # the first failures paused the destination: the rest were put off, not tried and spent
    assert len(failing) < 50
    rows = await store.list_deliveries(None, None, limit=1000)
    assert all(r.status == "pending" for r in rows if "down.test" in r.url)


async def test_deliveries_to_one_receiver_reuse_connections(store: SqliteStore, tmp_path: Path) -> None:
    receiver = Receiver(trustme.CA(), tmp_path, keep_alive=True).start()
    try:
        for i in range(60):
            await _push_to(store, f"t{i}", receiver.url(f"/push/t{i}"))
        guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]))
        client = build_egress_client(guard, make_ssl_context(receiver.ca_file))
        worker = OutboxWorker(store, client, BOX, RetrySchedule.parse("10ms"), concurrency=4)
        await _drain(worker, _count(receiver.requests, 60))  # type: ignore[arg-type]
    finally:
        receiver.stop()
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 60
    assert receiver.connections <= 4  # four slots, four kept-alive connections; not one per delivery


async def _until(condition: Callable[[], bool]) -> None:
    async def probe() -> bool:
        return condition()

    await _until_async(probe)


async def _until_async(condition: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not await condition():
            await asyncio.sleep(0.01)


class _FirstWriteHeld(SqliteStore):
    """The real store, but its first write of outcomes waits, as a write does behind a busy disk."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.first_write_started = asyncio.Event()
        self.release_first_write = asyncio.Event()
        self._writes = 0

    async def record_attempts(self, attempts: Sequence[Attempt]) -> None:
        self._writes += 1
        if self._writes == 1:
            self.first_write_started.set()
            await self.release_first_write.wait()
        await super().record_attempts(attempts)


async def test_a_receipt_is_written_while_an_earlier_write_still_commits(tmp_path: Path) -> None:
    """A receipt (the receiver's 2xx) is written as soon as it comes, not after the write before
    it: one write at a time held it in memory meanwhile, and a crash then sent it again."""
    async with _FirstWriteHeld(tmp_path / "t.db") as store:
        for task in ("ta", "tb"):
            await store.commit(
                Commit(
                    run=RunRow(task, "default", "echo", "running", -1, {}, clock.now_iso(), clock.now_iso()),
                    events=[],
                    expected_sequence=None,
                )
            )
            await _push_config(store, task, token=f"tok-{task}")
            await _enqueue_push(store, task, 0, final=True)

        async def handler(request: httpx.Request) -> httpx.Response:
            if request.headers["X-A2A-Notification-Token"] == "tok-tb":
                await store.first_write_started.wait()  # tb is answered while ta's receipt is being written
            return httpx.Response(204)

        def delivered(task: str) -> Callable[[], Awaitable[bool]]:
            async def probe() -> bool:
                return any(
                    push_stream_task(row.stream_key) == task for row in await store.list_deliveries(None, "delivered")
                )

            return probe

        worker = _worker(store, handler)
        worker_task = asyncio.create_task(worker.run())
        try:
            for _ in range(500):
                if await delivered("tb")():
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("tb's receipt waited for the write before it")
            assert not await delivered("ta")(), "ta's write is still held"
            store.release_first_write.set()
            for _ in range(500):
                if await delivered("ta")():
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("ta's receipt was never written")
        finally:
            store.release_first_write.set()
            worker_task.cancel()
            await asyncio.gather(worker_task, return_exceptions=True)
            await worker.client.aclose()
