"""The stream machinery in-process: keep-alives while idle, wake-ups as hints, SSE framing."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import orjson
from schemas import a2a_validator

from tether.a2a._asgi import send_stream
from tether.a2a.files import FileBytes
from tether.a2a.jsonrpc import jsonrpc_framing
from tether.a2a.streams import StreamProjections, sse, task_first
from tether.engine.follow import RunLogs
from tether.engine.notifier import Notifier
from tether.engine.state import apply, initial_snapshot
from tether.settings import Settings
from tether.store.base import EventRow, RunRow


class LogStore:
    """Just enough of a store: an event log and the run row folded from it."""

    def __init__(self) -> None:
        self.events: list[EventRow] = []
        self.state = initial_snapshot("run_1", "echo", "2026-01-01T00:00:00.000Z")
        self.append("run.started", {"inputs": {"prompt": "hi"}, "transport": "a2a"})

    def append(self, type_: str, payload: dict[str, Any]) -> None:
        doc = {
            "eventId": f"e{len(self.events)}",
            "runId": "run_1",
            "type": type_,
            "payload": payload,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "sequence": len(self.events),
        }
        apply(self.state, doc)
        self.events.append(EventRow("run_1", doc["sequence"], orjson.dumps(doc)))

    @property
    def row(self) -> RunRow:
        return RunRow(
            "run_1",
            "default",
            "echo",
            self.state["status"],
            len(self.events) - 1,
            json.loads(json.dumps(self.state)),
            "t0",
            "t1",
        )

    async def read_events(self, run_id: str, after: int = -1, limit: int = 1000) -> list[EventRow]:
        return [e for e in self.events if e.sequence > after][:limit]

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRow:
        return self.row


async def test_idle_streams_send_keepalives_and_wake_on_a_hint() -> None:
    store = LogStore()
    notifier = Notifier()
    host: Any = SimpleNamespace(
        settings=Settings(keepalive_seconds=0.05), store=store, notifier=notifier, logs=RunLogs(store, notifier)
    )  # type: ignore[arg-type]
    frames = sse(
        jsonrpc_framing("r1", legacy=True),
        task_first(
            host, StreamProjections(), FileBytes(store), store.row, "ctx_1", [], None, final_on_input_required=False
        ),
    )
    first = await anext(frames)
    assert first.startswith(b"id: 0\ndata: ")
    body = json.loads(first.split(b"data: ", 1)[1])
    a2a_validator("SendStreamingMessageSuccessResponse").validate(body)
    assert body["id"] == "r1" and body["result"]["kind"] == "task"
    assert await asyncio.wait_for(anext(frames), 1) == b": keepalive\n\n"
    assert await asyncio.wait_for(anext(frames), 1) == b": keepalive\n\n"

    store.append("run.completed", {"outputs": {"payload": "hi"}})
    host.notifier.publish("run_1")
    chunks = [chunk async for chunk in frames if chunk != b": keepalive\n\n"]
    assert len(chunks) == 1, "what one commit produced is written at once"
    rest = [frame + b"\n\n" for frame in chunks[0].split(b"\n\n") if frame]
    assert len(rest) == 2
    assert rest[0].startswith(b"data: ") and b'"kind":"artifact-update"' in rest[0], (
        "no id: on a frame that is not its event's last"
    )
    assert rest[1].startswith(b"id: 1\ndata: ")
    final = json.loads(rest[-1].split(b"data: ", 1)[1])
    assert final["result"]["status"]["state"] == "completed" and final["result"]["final"] is True
    assert host.notifier.subscriber_count == 0, "a finished stream leaves no waiter behind"


async def test_a_stream_whose_client_leaves_is_closed_at_once() -> None:
    """The endpoint notices a disconnect while the stream waits, not at its next write."""
    closed = asyncio.Event()
    left = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def chunks() -> Any:
        try:
            yield b"data: first\n\n"
            await asyncio.Event().wait()  # a task with nothing more to say for now
            yield b"data: never\n\n"
        finally:
            closed.set()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    streaming = asyncio.create_task(send_stream(receive, send, None, chunks()))
    async with asyncio.timeout(5):
        while len(sent) < 2:
            await asyncio.sleep(0.001)
    assert sent[0]["type"] == "http.response.start" and sent[1]["body"] == b"data: first\n\n"
    left.set()
    await asyncio.wait_for(streaming, 5)  # ends without an error: the client left, nothing failed
    assert closed.is_set(), "the stream's generators were closed (their subscriptions with them)"
    assert len(sent) == 2, "nothing is written after the client left"


async def test_a_stream_that_ends_completes_the_response_and_stops_watching() -> None:
    sent: list[dict[str, Any]] = []
    never = asyncio.Event()

    async def chunks() -> Any:
        yield b"data: only\n\n"

    async def receive() -> dict[str, Any]:
        await never.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(send_stream(receive, send, None, chunks()), 5)
    assert [m.get("more_body") for m in sent[1:]] == [True, False], "the last write completes the response"
    await asyncio.sleep(0)  # let the cancelled disconnect watcher finish
    assert asyncio.all_tasks() == {asyncio.current_task()}, "the disconnect watcher does not outlive the stream"


async def test_streams_of_one_run_share_each_projection_and_never_change_a_kept_snapshot() -> None:
    store = LogStore()
    notifier = Notifier()
    host: Any = SimpleNamespace(
        settings=Settings(keepalive_seconds=30), store=store, notifier=notifier, logs=RunLogs(store, notifier)
    )  # type: ignore[arg-type]
    projections = StreamProjections()
    row = store.row
    streams = [
        sse(
            jsonrpc_framing(f"r{i}", legacy=True),
            task_first(host, projections, FileBytes(store), row, "ctx_1", [], None, final_on_input_required=False),
        )
        for i in range(3)
    ]
    for stream in streams:
        await anext(stream)  # the Task as it stands
    store.append("node.started", {"nodeId": "gate"})
    store.append("node.suspended", {"nodeId": "gate", "interruptId": "int_1", "kind": "approval", "key": "k"})
    store.append("interrupt.requested", {"kind": "approval", "key": "k", "data": {"prompt": "ok?"}})
    notifier.publish("run_1")
    asked = [await asyncio.wait_for(anext(stream), 5) for stream in streams]
    assert b"input-required" in asked[0]
    assert (
        len({chunk.replace(b'"id":"r1"', b'"id":"r0"').replace(b'"id":"r2"', b'"id":"r0"') for chunk in asked}) == 1
    ), "the same frames"
    kept = projections.get("run_1", 3, False)
    assert kept is not None, "projected once, kept for the other streams"
    snapshot = json.dumps(kept[1], sort_keys=True)
    store.append("interrupt.resolved", {"nodeId": "gate", "interruptId": "int_1", "kind": "approval"})
    store.append("node.completed", {"nodeId": "gate", "outputs": {}})
    store.append("run.completed", {"outputs": {"payload": "hi"}})
    notifier.publish("run_1")
    ended = [await asyncio.wait_for(anext(stream), 5) for stream in streams]
    assert all(b'"final":true' in chunk for chunk in ended)
    assert json.dumps(kept[1], sort_keys=True) == snapshot, (
        "a stream going on copied the kept snapshot before changing it"
    )
    assert json.dumps(row.state, sort_keys=True) == json.dumps(LogStore().row.state, sort_keys=True), (
        "the run row read was never changed"
    )
    for stream in streams:
        await stream.aclose()
