"""The A2A 1.0 codec: the PascalCase methods, in ProtoJSON (a2a-v1.0-wire §3), and the 1.1 draft's generations.

Each method parses its ProtoJSON request (:mod:`tether.a2a.v1_0.protojson`), asks the
service, and renders the answer. Both 1.0 bindings call these same methods, JSON-RPC
(:mod:`tether.a2a.jsonrpc`) by name and HTTP+JSON (:mod:`tether.a2a.v1_0.http_json`) by
route, so they share every rule. Given the task generations, the same codec serves the
A2A 1.1 draft (``A2A-Version: 1.1``, where it is served).

``tenant`` is accepted on every request: Tether's tenant is the caller's key's, so an
empty tenant or the key's own is served, and any other is refused (a task lookup as
"not found", exactly like a task of that tenant, so nothing about other tenants leaks).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from tether.a2a.calls import Call, Method, Methods, Stream, message_scope
from tether.a2a.card import strict_v10
from tether.a2a.errors import (
    A2AError,
    InvalidParams,
    TaskGenerationMismatch,
    TaskNotFound,
    UnsupportedOperation,
    clip,
    quote,
)
from tether.a2a.generations import Generations
from tether.a2a.message import parse_params
from tether.a2a.projection import TERMINAL, task, task_state
from tether.a2a.service import A2AService, SendRequest, TaskQuery, page_token, parse_page_token
from tether.a2a.streams import StreamProjections, parse_after
from tether.a2a.tasks import EncodedTasks, LiveTask
from tether.a2a.v1_0 import protojson
from tether.a2a.versions import Version
from tether.store.base import PushConfigRow, RunRow

__all__ = ["V10Codec", "push_view"]

VERSION = Version.V1_0.value
#: the longest a 1.1 ``GetTask`` with ``currentGeneration`` holds its answer
LONG_POLL_SECONDS = 30.0


def _foreign_tenant(call: Call, tenant: str | None) -> bool:
    return bool(tenant) and tenant != call.principal.tenant


def _check_tenant(call: Call, tenant: str | None) -> None:
    """Refuse a tenant that is not the caller's (for requests that name no task)."""
    if _foreign_tenant(call, tenant):
        raise InvalidParams(
            f"tenant {quote(tenant)} is not this API key's tenant: leave tenant out, or send the key's own",
            data={"errors": [{"path": "params.tenant", "message": "not the caller's tenant"}]},
        )


def _unknown(task_id: str) -> TaskNotFound:
    return TaskNotFound(
        f"task {quote(task_id)} not found: no task with that id is visible to this caller",
        data={"taskId": clip(task_id)},
    )


def _send_request(raw: dict[str, Any], version: str = VERSION) -> SendRequest:
    params = parse_params(protojson.SendMessageRequest, raw)
    config = params.configuration
    push = config.task_push_notification_config if config else None
    return SendRequest(
        message=protojson.canonical_message(params.message),
        version=version,
        metadata=params.metadata,
        history_length=protojson.history_length(
            config.history_length if config else None, "configuration.historyLength"
        ),
        blocking=not (config is not None and config.return_immediately is True),
        push=protojson.canonical_push(push) if push is not None else None,
        accepted_output_modes=config.accepted_output_modes if config else None,
    )


def push_view(row: PushConfigRow) -> dict[str, Any]:
    """A ``TaskPushNotificationConfig`` as reads answer it: never its token or credentials."""
    out: dict[str, Any] = {"id": row.config_id, "taskId": row.task_id, "url": row.url}
    if row.auth_schemes:
        out["authentication"] = {"scheme": row.auth_schemes[0]}
    return out


def _const(scope: str | None) -> Any:
    return lambda _params: scope


def _moved_past(sequence: int) -> Callable[[RunRow], bool]:
    return lambda row: row.last_sequence > sequence


def _states_named(run: Callable[[Call], Awaitable[Any]]) -> Callable[[Call], Awaitable[Any]]:
    """``run``, its refusals naming a task state the 1.0 way (``TASK_STATE_COMPLETED``, not ``completed``)."""

    async def named(call: Call) -> Any:
        try:
            return await run(call)
        except A2AError as error:
            if isinstance(error.data, dict) and error.data.get("state") in protojson.STATE_NAMES:
                error.data = {**error.data, "state": protojson.STATE_NAMES[error.data["state"]]}
            raise

    return named


class V10Codec:
    """The 1.0 methods of one host (it keeps the 1.0 encodings of tasks and stream events).

    With ``generations``, the same methods speak 1.1, the dev-1.1 draft: every Task and
    update carries its ``generation``, ``GetTask`` honours ``currentGeneration`` as a
    long-poll, and a follow-up's ``ifGenerationMatch`` must match.
    """

    def __init__(
        self,
        service: A2AService,
        legacy_card: Any,
        generations: Generations | None = None,
        *,
        version: str = VERSION,
    ) -> None:
        self.service = service
        #: what a push config registered here is kept under (its pushes' shape): 1.0, or 1.0 with bound ids
        self.version = version
        self.generations = generations
        self.encoded = EncodedTasks(service.files, protojson.task)
        self.projections = StreamProjections(protojson.frame_task, protojson.event, generations)
        self._card = legacy_card
        methods: dict[str, Method] = {
            "SendMessage": Method(self.send, message_scope, check=_send_request),
            "SendStreamingMessage": Method(self.stream, message_scope, streaming=True, check=_send_request),
            "GetTask": Method(self.get, _const("runs:read"), check=lambda p: parse_params(protojson.GetTaskRequest, p)),
            "ListTasks": Method(
                self.list, _const("runs:read"), check=lambda p: parse_params(protojson.ListTasksRequest, p)
            ),
            "CancelTask": Method(self.cancel, _const("runs:cancel"), check=self._task_id),
            "SubscribeToTask": Method(self.subscribe, _const("runs:read"), streaming=True, check=self._task_id),
            "CreateTaskPushNotificationConfig": Method(
                self.create_push, _const("runs:create"), check=lambda p: parse_params(protojson.ProtoPushConfig, p)
            ),
            "GetTaskPushNotificationConfig": Method(
                self.get_push, _const("runs:read"), check=lambda p: parse_params(protojson.PushConfigRequest, p)
            ),
            "ListTaskPushNotificationConfigs": Method(
                self.list_push, _const("runs:read"), check=lambda p: parse_params(protojson.ListPushConfigsRequest, p)
            ),
            "DeleteTaskPushNotificationConfig": Method(
                self.delete_push, _const("runs:create"), check=lambda p: parse_params(protojson.PushConfigRequest, p)
            ),
            "GetExtendedAgentCard": Method(self.extended_card, _const(None), keyed=True),
        }
        self.methods: Methods = {
            name: dataclasses.replace(method, run=_states_named(method.run)) for name, method in methods.items()
        }

    async def _task(
        self,
        row: RunRow,
        context_id: str,
        history: list[dict[str, Any]],
        history_length: int | None = None,
        *,
        artifacts: bool = True,
    ) -> dict[str, Any]:
        """The canonical Task of a run, file bytes in (artifacts left out unless ``artifacts``)."""
        doc = task(row, context_id, history, history_length)
        if not artifacts:
            doc.pop("artifacts", None)
        return await self.service.files.inline(row.run_id, doc)

    @staticmethod
    def _task_id(raw: dict[str, Any]) -> protojson.TaskIdRequest:
        return parse_params(protojson.TaskIdRequest, raw)

    async def _generation(self, row: RunRow) -> int | None:
        return await self.generations.at(row) if self.generations is not None else None

    async def _check_generation(self, call: Call, request: SendRequest) -> None:
        """1.1: a follow-up whose ``ifGenerationMatch`` is not the task's generation changes nothing (-32010).

        Ignored on a message that starts a task, as the draft says. The check reads the
        generation just before the send; a change that lands in between is not caught.
        """
        if self.generations is None:
            return
        expected = protojson.generation_of(call.params, "configuration", "ifGenerationMatch")
        task_id = request.message.taskId
        if expected is None or task_id is None:
            return
        live = await self.service.get(call.principal, task_id, history=False)
        current = await self.generations.at(live.run)
        if current != expected:
            raise TaskGenerationMismatch(
                f"task {quote(task_id)} is at generation {current}, not {expected}: read it again and decide anew",
                data={"taskId": clip(task_id), "expectedGeneration": str(expected), "currentGeneration": str(current)},
            )

    async def send(self, call: Call) -> dict[str, Any]:
        _check_tenant(call, call.params.get("tenant"))
        request = _send_request(call.params, self.version)
        await self._check_generation(call, request)
        sent = await self.service.send(call.principal, request)
        doc = await self._task(sent.run, sent.context_id, sent.history, request.history_length)
        return {"task": protojson.task(doc, await self._generation(sent.run))}

    async def stream(self, call: Call) -> Stream:
        _check_tenant(call, call.params.get("tenant"))
        request = _send_request(call.params, self.version)
        await self._check_generation(call, request)
        return Stream(await self.service.stream(call.principal, request, self.projections))

    async def get(self, call: Call) -> Any:
        params = parse_params(protojson.GetTaskRequest, call.params)
        if _foreign_tenant(call, params.tenant):
            raise _unknown(params.id)
        length = protojson.history_length(params.history_length)
        live = await self.service.get(call.principal, params.id, history=length != 0)
        if self.generations is None:
            return await self.encoded.encode(live, length)
        generation = await self.generations.at(live.run)
        known = protojson.generation_of(call.params, "currentGeneration")
        if known is not None and generation <= known:
            live, generation = await self._past(call, live, known, history=length != 0)
        return await self.encoded.encode(live, length, generation)

    async def _past(self, call: Call, live: LiveTask, known: int, *, history: bool) -> tuple[LiveTask, int]:
        """1.1 long-poll: the task once its generation passes ``known``, or as it is when the wait runs out."""
        assert self.generations is not None
        a2a = self.service.a2a
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(a2a.settings.a2a_request_timeout, LONG_POLL_SECONDS)
        generation = await self.generations.at(live.run)
        while generation <= known and not live.run.is_terminal:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await a2a.engine.wait_for(live.run.run_id, _moved_past(live.run.last_sequence), remaining)
            live = await self.service.get(call.principal, live.run.run_id, history=history)
            generation = await self.generations.at(live.run)
        return live, generation

    async def list(self, call: Call) -> dict[str, Any]:
        params = parse_params(protojson.ListTasksRequest, call.params)
        _check_tenant(call, params.tenant)
        size = params.page_size if params.page_size is not None else 50
        if not 1 <= size <= 100:
            raise InvalidParams(
                f"pageSize must be between 1 and 100, not {size}",
                data={"errors": [{"path": "params.pageSize", "message": "must be 1 to 100"}]},
            )
        length = protojson.history_length(params.history_length)
        query = TaskQuery(
            context_id=params.context_id,
            state=protojson.state_of(params.status),
            updated_after=params.status_timestamp_after,
            page_size=size,
            after=parse_page_token(params.page_token),
        )
        page = await self.service.list_tasks(call.principal, query, history=length != 0)
        artifacts = bool(params.include_artifacts)
        tasks = [
            protojson.task(
                await self._task(t.run, t.context_id, t.history or [], length, artifacts=artifacts),
                await self._generation(t.run),
            )
            for t in page.tasks
        ]
        return {"tasks": tasks, "nextPageToken": page_token(page.next_after), "pageSize": size, "totalSize": page.total}

    async def cancel(self, call: Call) -> dict[str, Any]:
        params = self._task_id(call.params)
        if _foreign_tenant(call, params.tenant):
            raise _unknown(params.id)
        done = await self.service.cancel(call.principal, params.id)
        doc = await self._task(done.run, done.context_id, done.history)
        return protojson.task(doc, await self._generation(done.run))

    async def subscribe(self, call: Call) -> Stream:
        """The current Task first, then its updates until it ends; or, after ``Last-Event-ID``, exactly the
        updates after that event. A task that ended with nothing left to replay is refused (-32004)."""
        params = self._task_id(call.params)
        if _foreign_tenant(call, params.tenant):
            raise _unknown(params.id)
        live = await self.service.get(call.principal, params.id, history=False)
        after = parse_after(call.last_event_id, None, live.run)
        state = task_state(live.run.status)
        if state in TERMINAL and (after is None or after == live.run.last_sequence):
            raise UnsupportedOperation(
                f"task {quote(params.id)} is {protojson.STATE_NAMES[state]}: a task that ended has no updates to "
                "subscribe to; read it with GetTask",
                data={"taskId": clip(params.id), "state": protojson.STATE_NAMES[state]},
            )
        return Stream(await self.service.subscribe(live, after, self.projections))

    async def create_push(self, call: Call) -> dict[str, Any]:
        params = parse_params(protojson.ProtoPushConfig, call.params)
        if not params.task_id:
            raise InvalidParams(
                "taskId is required: the task whose updates are pushed",
                data={"errors": [{"path": "params.taskId", "message": "required"}]},
            )
        if _foreign_tenant(call, params.tenant):
            raise _unknown(params.task_id)
        push = protojson.canonical_push(params)
        row = await self.service.set_push(call.principal, params.task_id, push, self.version)
        return push_view(row)

    async def get_push(self, call: Call) -> dict[str, Any]:
        params = parse_params(protojson.PushConfigRequest, call.params)
        if _foreign_tenant(call, params.tenant):
            raise _unknown(params.task_id)
        found = await self.service.get_push(call.principal, params.task_id, params.id)
        if found is None:
            raise TaskNotFound(
                f"push config {quote(params.id)} not found on task {quote(params.task_id)}",
                data={"taskId": clip(params.task_id), "configId": clip(params.id)},
            )
        return push_view(found)

    async def list_push(self, call: Call) -> dict[str, Any]:
        params = parse_params(protojson.ListPushConfigsRequest, call.params)
        if _foreign_tenant(call, params.tenant):
            raise _unknown(params.task_id)
        rows = await self.service.list_push(call.principal, params.task_id)
        return {"configs": [push_view(r) for r in rows], "nextPageToken": ""}

    async def delete_push(self, call: Call) -> dict[str, Any]:
        params = parse_params(protojson.PushConfigRequest, call.params)
        if _foreign_tenant(call, params.tenant):
            raise _unknown(params.task_id)
        await self.service.delete_push(call.principal, params.task_id, params.id)
        return {}

    async def extended_card(self, call: Call) -> Any:
        """The extended card in 1.0 fields only: a 1.0 answer is parsed by the strict 1.0 proto."""
        _check_tenant(call, call.params.get("tenant"))
        return strict_v10(await self._card(call))
