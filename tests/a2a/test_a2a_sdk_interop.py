"""The official client, a2a-sdk 0.3.26, drives Tether: card, send, stream, get, cancel, resubscribe, replies.

Everything the SDK hands back is dumped and validated against the A2A v0.3 schema too,
so a value the SDK's models would tolerate but the spec forbids still fails here.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import (
    DataPart,
    FilePart,
    FileWithBytes,
    FileWithUri,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)
from a2a_wire import run_events
from harness import Host, HostProcess
from schemas import a2a_validator

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

Update = TaskStatusUpdateEvent | TaskArtifactUpdateEvent | None
FILE_URI = "https://files.example.com/q3/signed.pdf"


def _dump(model: Any) -> dict[str, Any]:
    value: dict[str, Any] = model.model_dump(mode="json", exclude_none=True, by_alias=True)
    return value


def _checked(task: Task, update: Update = None) -> Task:
    a2a_validator("Task").validate(_dump(task))
    if isinstance(update, TaskStatusUpdateEvent):
        a2a_validator("TaskStatusUpdateEvent").validate(_dump(update))
    elif isinstance(update, TaskArtifactUpdateEvent):
        a2a_validator("TaskArtifactUpdateEvent").validate(_dump(update))
    return task


def user(
    text: str | None = None, *, data: dict[str, Any] | None = None, task_id: str | None = None, skill: str | None = None
) -> Message:
    parts: list[Part] = []
    if text is not None:
        parts.append(Part(root=TextPart(text=text)))
    if data is not None or text is None:  # with neither, an empty data part: the host refuses parts: []
        parts.append(Part(root=DataPart(data=data or {})))
    return Message(
        role=Role.user,
        parts=parts,
        message_id=f"sdk-{uuid.uuid4()}",
        task_id=task_id,
        metadata={"skillId": skill} if skill else None,
    )


class Sdk:
    """SDK clients of one host (streaming or not, blocking or not) sharing one keyed httpx client."""

    def __init__(self, host: Host, key: str, http: httpx.AsyncClient) -> None:
        self.host = host
        self.key = key
        self.http = http

    async def client(self, *, streaming: bool = False, polling: bool = False) -> Client:
        return await ClientFactory.connect(
            self.host.url, client_config=ClientConfig(httpx_client=self.http, streaming=streaming, polling=polling)
        )

    async def send(self, msg: Message, *, polling: bool = False) -> Task:
        client = await self.client(polling=polling)
        results = [item async for item in client.send_message(msg)]
        assert len(results) == 1
        item = results[0]
        assert isinstance(item, tuple), item
        return _checked(item[0], item[1])

    async def stream(self, msg: Message) -> list[tuple[Task, Update]]:
        """Each event with a copy of the task as it stood then (the SDK updates one Task in place)."""
        client = await self.client(streaming=True)
        return [(_checked(t, u).model_copy(deep=True), u) async for t, u in _pairs(client.send_message(msg))]


async def _pairs(items: AsyncIterator[Any]) -> AsyncIterator[tuple[Task, Update]]:
    async for item in items:
        assert isinstance(item, tuple), f"Tether always answers with a task, got {item!r}"
        yield item


@pytest.fixture
async def sdk(host: Host, key: str) -> AsyncIterator[Sdk]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        yield Sdk(host, key, http)


async def test_card_resolution(sdk: Sdk) -> None:
    card = await A2ACardResolver(sdk.http, sdk.host.url).get_agent_card()
    a2a_validator("AgentCard").validate(_dump(card))
    assert card.url == f"{sdk.host.url}/v1/a2a" and card.preferred_transport == "JSONRPC"
    client = await sdk.client()
    assert (await client.get_card()).name == "Tether"


async def test_blocking_and_non_blocking_send_then_get(sdk: Sdk) -> None:
    done = await sdk.send(user("hello"))
    assert done.status.state == TaskState.completed
    assert done.artifacts and done.artifacts[0].parts[0].root == TextPart(text="hello")
    queued = await sdk.send(user(skill="slow"), polling=True)
    assert queued.status.state in (TaskState.submitted, TaskState.working)
    client = await sdk.client()
    got = _checked(await client.get_task(TaskQueryParams(id=done.id, history_length=1)))
    assert got.id == done.id and got.status.state == TaskState.completed and got.history and len(got.history) == 1


async def test_stream_to_completion(sdk: Sdk) -> None:
    events = await sdk.stream(user("streamed"))
    first_task, first_update = events[0]
    assert first_update is None and first_task.status.state == TaskState.working
    kinds = [type(u).__name__ for _, u in events[1:]]
    assert kinds == ["TaskArtifactUpdateEvent", "TaskStatusUpdateEvent"]
    final_task, final_update = events[-1]
    assert isinstance(final_update, TaskStatusUpdateEvent) and final_update.final
    assert final_task.status.state == TaskState.completed and final_task.artifacts


async def test_cancel(sdk: Sdk) -> None:
    waiting = await sdk.send(user("draft", skill="approval-gated"))
    assert waiting.status.state == TaskState.input_required
    client = await sdk.client()
    cancelled = _checked(await client.cancel_task(TaskIdParams(id=waiting.id)))
    assert cancelled.status.state == TaskState.canceled
    with pytest.raises(A2AClientJSONRPCError) as refused:
        await client.cancel_task(TaskIdParams(id=waiting.id))
    assert refused.value.error.code == -32002
    with pytest.raises(A2AClientJSONRPCError) as unknown:
        await client.get_task(TaskQueryParams(id="run_nope"))
    assert unknown.value.error.code == -32001


async def test_reply_to_an_approval_and_to_a_clarification(sdk: Sdk) -> None:
    asked = await sdk.send(user("draft", skill="approval-gated"))
    assert asked.status.state == TaskState.input_required
    assert asked.metadata and asked.metadata["openwop"]["interrupt"]["kind"] == "approval"
    approved = await sdk.send(user(data={"action": "accept"}, task_id=asked.id))
    assert approved.status.state == TaskState.completed
    question = await sdk.send(user(skill="clarification-gated"))
    assert question.status.state == TaskState.input_required
    answered = await sdk.send(user("green", task_id=question.id))
    assert answered.status.state == TaskState.completed
    assert answered.artifacts and answered.artifacts[0].parts[0].root == TextPart(text="green")
    streamed_question = (await sdk.stream(user(skill="clarification-gated")))[-1]
    assert streamed_question[0].status.state == TaskState.input_required
    streamed_answer = await sdk.stream(user(data={"answers": {"q1": "teal"}}, task_id=streamed_question[0].id))
    assert streamed_answer[-1][0].status.state == TaskState.completed


async def test_resubscribe_watches_the_decision(sdk: Sdk) -> None:
    asked = await sdk.send(user("draft", skill="approval-gated"))
    watcher = await sdk.client(streaming=True)
    states: list[TaskState] = []
    async for task, update in _pairs(watcher.resubscribe(TaskIdParams(id=asked.id))):
        _checked(task, update)
        states.append(task.status.state)
        if update is None:
            await sdk.send(user(data={"approve": True}, task_id=asked.id), polling=True)
    # each state once: the steps a multi-step task reports in between stay "working"
    assert _changes(states) == [TaskState.input_required, TaskState.working, TaskState.completed]


def _changes(states: list[TaskState]) -> list[TaskState]:
    return [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]


@pytest.mark.process  # killed and restarted
async def test_hand_off_disconnect_restart_then_approve_by_message(host: HostProcess, key: str) -> None:
    """Done when: hand Tether a task, disconnect, survive a restart, get it, resubscribe, approve, watch it complete."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        sdk = Sdk(host, key, http)
        handed = await sdk.send(user("a draft to approve", skill="approval-gated"), polling=True)
        assert handed.status.state in (TaskState.submitted, TaskState.working, TaskState.input_required)
    host.kill()
    host.start()
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        sdk = Sdk(host, key, http)
        client = await sdk.client()
        later = _checked(await client.get_task(TaskQueryParams(id=handed.id)))
        for _ in range(300):  # killed before the gate, it is working until recovery reaches it
            if later.status.state != TaskState.working:
                break
            await asyncio.sleep(0.05)
            later = _checked(await client.get_task(TaskQueryParams(id=handed.id)))
        assert later.status.state == TaskState.input_required
        assert later.metadata and later.metadata["openwop"]["interrupt"]["kind"] == "approval"
        watcher = await sdk.client(streaming=True)
        watched: list[tuple[TaskState, bool | None]] = []
        approval: asyncio.Task[Task] | None = None
        async for task, update in _pairs(watcher.resubscribe(TaskIdParams(id=handed.id))):
            _checked(task, update)
            watched.append((task.status.state, update.final if isinstance(update, TaskStatusUpdateEvent) else None))
            if update is None:
                approval = asyncio.create_task(
                    sdk.send(user(data={"action": "accept", "feedback": "ship it"}, task_id=handed.id))
                )
        assert approval is not None and (await approval).status.state == TaskState.completed
    changes = [w for i, w in enumerate(watched) if i == 0 or watched[i - 1] != w]
    assert changes == [(TaskState.input_required, None), (TaskState.working, False), (TaskState.completed, True)]
    started = [e for e in run_events(host.http(key), handed.id) if e["type"] == "run.started"]
    assert len(started) == 1


def _file_message(data: bytes) -> Message:
    """Text, about 1 MiB of bytes, and a file by URI: what echo must answer with, part for part."""
    return Message(
        role=Role.user,
        message_id=f"sdk-{uuid.uuid4()}",
        parts=[
            Part(root=TextPart(text="the Q3 report")),
            Part(
                root=FilePart(
                    file=FileWithBytes(bytes=base64.b64encode(data).decode(), name="q3.bin", mime_type="x/q3")
                )
            ),
            Part(root=FilePart(file=FileWithUri(uri=FILE_URI, name="signed.pdf", mime_type="application/pdf"))),
        ],
    )


def _echoed(task: Task, data: bytes) -> None:
    """The task's one artifact is the message as sent: text, the bytes (sha256 compared), the URI."""
    assert task.status.state == TaskState.completed and task.artifacts, task.status
    text, sent, linked = (part.root for part in task.artifacts[0].parts)
    assert text == TextPart(text="the Q3 report")
    assert isinstance(sent, FilePart) and isinstance(sent.file, FileWithBytes)
    assert (sent.file.name, sent.file.mime_type) == ("q3.bin", "x/q3")
    assert hashlib.sha256(base64.b64decode(sent.file.bytes)).hexdigest() == hashlib.sha256(data).hexdigest()
    assert isinstance(linked, FilePart) and linked.file == FileWithUri(
        uri=FILE_URI, name="signed.pdf", mime_type="application/pdf"
    )


@pytest.mark.process  # SIGKILL
async def test_a_file_round_trips_through_echo_from_get_the_stream_and_a_restart(host: HostProcess, key: str) -> None:
    data = random.Random(26).randbytes(1024 * 1024 + 3)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        sdk = Sdk(host, key, http)
        sent = await sdk.send(_file_message(data))
        _echoed(sent, data)
        client = await sdk.client()
        _echoed(_checked(await client.get_task(TaskQueryParams(id=sent.id))), data)
        streamed = await sdk.stream(_file_message(data))
        [update] = [u for _, u in streamed if isinstance(u, TaskArtifactUpdateEvent)]
        _echoed(streamed[-1][0], data)
        assert update.artifact.parts == streamed[-1][0].artifacts[0].parts  # type: ignore[index]
    host.restart()  # SIGKILL, then the same store
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        client = await Sdk(host, key, http).client()
        for task_id in (sent.id, streamed[-1][0].id):
            _echoed(_checked(await client.get_task(TaskQueryParams(id=task_id))), data)
