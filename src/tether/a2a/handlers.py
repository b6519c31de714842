"""The A2A methods, with no HTTP in sight: params in, a Task (or a stream of events) out.

``message/send`` without a ``taskId`` starts a run of the named skill; with one, it
answers the run's pending interrupt. Either way the user's message is stored as task
history in the same commit, a repeated ``messageId`` changes nothing (and one reused for
different content is refused), and the answer is the Task projected from the run. Domain
errors (``TetherError``) propagate: the endpoint turns them into JSON-RPC errors in one
place, :func:`tether.a2a.jsonrpc.rpc_error_from`.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel

from tether import clock
from tether.a2a.jsonrpc import (
    ContentTypeNotSupported,
    ExtendedCardNotConfigured,
    InvalidParams,
    PushNotificationNotSupported,
    RpcRequest,
    TaskNotCancelable,
    UnsupportedOperation,
    clip,
    quote,
)
from tether.a2a.params import (
    DeletePushParams,
    GetPushParams,
    Message,
    SendParams,
    SetPushParams,
    TaskIdParams,
    TaskQueryParams,
    message_inputs,
    parse_params,
    parse_send_params,
    reply_value,
)
from tether.a2a.projection import INTERRUPTED, TERMINAL, task, task_state
from tether.a2a.push import PushConfigInput, check_push_url, config_view, seal_config
from tether.a2a.skills import OUTPUT_MODES, resolve_skill
from tether.a2a.streams import Frame, StreamProjections, parse_after, replay, task_first
from tether.a2a.surface import A2ASurface
from tether.a2a.tasks import A2A_TRANSPORT, EncodedTasks, LiveTask, a2a_metadata, load_task
from tether.engine.engine import IdempotencyClaim
from tether.errors import Conflict
from tether.ids import new_id
from tether.run_state import InterruptRecord
from tether.store.base import Extra, RunRow, TaskMessage
from tether.types import Principal

__all__ = ["A2A_SCOPES", "METHODS", "STREAMING_METHODS", "A2AHandlers", "Stream", "check_params", "required_scope"]

STREAMING_METHODS = frozenset({"message/stream", "tasks/resubscribe"})
_PUSH_METHODS = frozenset(
    {
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
    }
)
METHODS = (
    frozenset({"message/send", "tasks/get", "tasks/cancel", "agent/getAuthenticatedExtendedCard"})
    | STREAMING_METHODS
    | _PUSH_METHODS
)

_MODE_ALIASES = {"text": "text/plain", "json": "application/json", "data": "application/json"}

#: every scope :func:`required_scope` can ask for: what the A2A methods need, and no more
A2A_SCOPES = frozenset({"runs:create", "runs:read", "runs:cancel", "approvals:respond"})

#: the params model of each method that takes params (push ``set`` also checks its config)
_PARAMS: dict[str, type[BaseModel]] = {
    "tasks/get": TaskQueryParams,
    "tasks/cancel": TaskIdParams,
    "tasks/resubscribe": TaskIdParams,
    "tasks/pushNotificationConfig/set": SetPushParams,
    "tasks/pushNotificationConfig/get": GetPushParams,
    "tasks/pushNotificationConfig/list": TaskIdParams,
    "tasks/pushNotificationConfig/delete": DeletePushParams,
}


def required_scope(request: RpcRequest) -> str | None:
    """The API-key scope a call needs, decided before its params are checked.

    A message that names a task is a reply to its interrupt (``approvals:respond``);
    one that does not starts a run (``runs:create``). Methods that only answer
    "not supported" need no scope beyond a valid key.
    """
    if request.method in ("message/send", "message/stream"):
        message = request.params.get("message")
        if isinstance(message, dict) and message.get("taskId") is not None:
            return "approvals:respond"
        return "runs:create"
    if request.method in ("tasks/get", "tasks/resubscribe"):
        return "runs:read"
    if request.method == "tasks/cancel":
        return "runs:cancel"
    if request.method in ("tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/list"):
        return "runs:read"
    if request.method in ("tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/delete"):
        return "runs:create"
    return None


def check_params(method: str, params: dict[str, Any]) -> None:
    """Check ``params`` for ``method`` as the method itself would, without running it.

    For a request that will be refused anyway (a notification): the caller learns what
    is wrong with its params (-32602) before being told it lacks an id.
    """
    if method in ("message/send", "message/stream"):
        parse_send_params(params)
        return
    model = _PARAMS.get(method)
    if model is not None:
        checked = parse_params(model, params)
        if isinstance(checked, SetPushParams):
            parse_params(PushConfigInput, checked.pushNotificationConfig)


@dataclass(frozen=True, slots=True)
class Stream:
    """A streaming answer: the frames to send as server-sent events, in batches written at once."""

    frames: AsyncIterator[list[Frame]]


def _settled(row: RunRow) -> bool:
    """A blocking send answers once the task ends or waits for the caller."""
    return task_state(row.status) in TERMINAL | INTERRUPTED


def _not_cancelable(task_id: str, run_status: str) -> TaskNotCancelable:
    state = task_state(run_status)
    return TaskNotCancelable(f"task {quote(task_id)} is already {state}: it cannot be canceled", data={"state": state})


def _digest(dumped: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(dumped, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _reused(message_id: str, task_id: str | None) -> InvalidParams:
    """A messageId sent before with other content: refused, as REST's Idempotency-Key is (409 there).

    -32602 rather than a host-specific code: the params are what must change (a new
    messageId), every v0.3 client knows the code, and A2A keeps allotting codes from
    -32001 up, so a code of our own could collide with a later version's. ``data.reason``
    is REST's error code, which maps onto A2A 1.0's ErrorInfo reason.
    """
    return InvalidParams(
        f"messageId {quote(message_id)} was already used for a message with different content: "
        "send a new message with a new messageId (resending the very same message returns its task)",
        data={"reason": "idempotency_key_mismatch", "messageId": clip(message_id), "taskId": task_id},
    )


def _start_scope(principal: Principal) -> str:
    """The idempotency scope of the messages a principal starts tasks with (keyed by messageId)."""
    return f"a2a:message/send:{principal.name}"


def _history_entry(dumped: dict[str, Any], task_id: str, context_id: str) -> dict[str, Any]:
    """The message (dumped) as it is kept in the task's history: tied to its task and context."""
    return {**dumped, "taskId": task_id, "contextId": context_id}


class A2AHandlers:
    """The methods of ``/v1/a2a`` for one host; one per host, it keeps only encodings and projections."""

    def __init__(self, a2a: A2ASurface, encoded: EncodedTasks, projections: StreamProjections) -> None:
        self.a2a = a2a
        self.capabilities = a2a.capabilities
        self.encoded = encoded
        self.projections = projections

    async def handle(
        self, principal: Principal, request: RpcRequest, *, last_event_id: str | None = None
    ) -> dict[str, Any] | list[dict[str, Any]] | orjson.Fragment | None | Stream:
        """Run one call; raises an RpcError for anything the caller must change."""
        method = request.method
        if method in STREAMING_METHODS and not self.capabilities.streaming:
            raise UnsupportedOperation(f"{method} is not served: this agent's capabilities.streaming is false")
        if method == "message/send":
            return await self.message_send(principal, request.params)
        if method == "message/stream":
            return await self.message_stream(principal, request.params)
        if method == "tasks/get":
            return await self.tasks_get(principal, request.params)
        if method == "tasks/cancel":
            return await self.tasks_cancel(principal, request.params)
        if method == "tasks/resubscribe":
            return await self.tasks_resubscribe(principal, request.params, last_event_id)
        if method in _PUSH_METHODS:
            if not self.capabilities.push_notifications:
                raise PushNotificationNotSupported(
                    "this agent does not deliver push notifications (capabilities.pushNotifications is false): "
                    "poll tasks/get or re-attach with tasks/resubscribe"
                )
            return await self.push_config(principal, method, request.params)
        assert method == "agent/getAuthenticatedExtendedCard"
        raise ExtendedCardNotConfigured(
            "this agent has no extended card: the public card at /.well-known/agent-card.json is complete"
        )

    # message/send and message/stream ------------------------------------------------------

    async def message_send(self, principal: Principal, raw: dict[str, Any]) -> dict[str, Any]:
        params = self._send_params(raw)
        config = params.configuration
        blocking = config is None or config.blocking is not False
        row, context_id, history = await self._deliver(principal, params, advance=blocking)
        if blocking and not _settled(row):
            row = await self.a2a.engine.wait_for(row.run_id, _settled, self.a2a.settings.a2a_request_timeout) or row
        if history is None:
            history = await self.a2a.store.list_task_messages(row.run_id)
        return task(row, context_id, history, config.historyLength if config else None)

    async def message_stream(self, principal: Principal, raw: dict[str, Any]) -> Stream:
        params = self._send_params(raw)
        row, context_id, history = await self._deliver(principal, params)
        if history is None:
            history = await self.a2a.store.list_task_messages(row.run_id)
        length = params.configuration.historyLength if params.configuration else None
        return Stream(
            task_first(self.a2a, self.projections, row, context_id, history, length, final_on_input_required=True)
        )

    async def _inline_push(self, params: SendParams) -> PushConfigInput | None:
        """The push config given with a message, checked by the egress guard before anything is written."""
        config = params.configuration
        if config is None or config.pushNotificationConfig is None:
            return None
        push = parse_params(PushConfigInput, config.pushNotificationConfig)
        await check_push_url(self.a2a, push.url)
        return push

    def _send_params(self, raw: dict[str, Any]) -> SendParams:
        params = parse_send_params(raw)
        config = params.configuration
        if (
            config is not None
            and config.pushNotificationConfig is not None
            and not self.capabilities.push_notifications
        ):
            raise PushNotificationNotSupported(
                "configuration.pushNotificationConfig was given, but this agent does not deliver push notifications "
                "(capabilities.pushNotifications is false): leave it out and poll tasks/get or use message/stream"
            )
        if config is not None and config.acceptedOutputModes:
            accepted = {_MODE_ALIASES.get(m, m) for m in config.acceptedOutputModes}
            if not accepted & {*OUTPUT_MODES, "*/*", "*"}:
                raise ContentTypeNotSupported(
                    f"this agent answers in {' and '.join(OUTPUT_MODES)}; "
                    f"acceptedOutputModes {clip(str(config.acceptedOutputModes))} accepts neither",
                    data={"outputModes": list(OUTPUT_MODES)},
                )
        return params

    async def _deliver(
        self, principal: Principal, params: SendParams, *, advance: bool = False
    ) -> tuple[RunRow, str, list[dict[str, Any]] | None]:
        """Start a run or answer one: the run, its context, and its history when known without a read.

        ``advance``: the caller waits for the outcome anyway.
        """
        push = await self._inline_push(params)
        if params.message.taskId is not None:
            row, context_id = await self._reply(principal, params.message, push, advance)
            return row, context_id, None
        return await self._start(principal, params, push, advance)

    async def _start(
        self, principal: Principal, params: SendParams, push: PushConfigInput | None, advance: bool
    ) -> tuple[RunRow, str, list[dict[str, Any]] | None]:
        """Start the skill's run; a (principal, messageId) seen before returns its task, if the message is the same."""
        message = params.message
        store = self.a2a.store
        workflow_id = resolve_skill(
            self.a2a.registry, self.a2a.settings.default_skill, message.metadata, params.metadata
        )
        inputs = message_inputs(message)
        dumped = message.model_dump(exclude_none=True)
        context_id = message.contextId or new_id("ctx_")
        run_id = new_id("run_")
        answer = {"taskId": run_id, "contextId": context_id}
        claim = IdempotencyClaim(_start_scope(principal), message.messageId, _digest(dumped), 200, answer)
        # the history entry and any push config, written with the run
        first = [_history_entry(dumped, run_id, context_id)]
        extras: list[Extra] = [TaskMessage(run_id, message.messageId, first[0], clock.now_iso())]
        if push is not None:
            extras.append(seal_config(self.a2a, run_id, principal.tenant, push))
        created = await self.a2a.engine.create_run(
            principal,
            workflow_id,
            inputs,
            run_id=run_id,
            tags=[f"a2a:{message.messageId}", f"a2a:{context_id}"],
            metadata=a2a_metadata(context_id, message.messageId, workflow_id),
            transport=A2A_TRANSPORT,
            idempotency=claim,
            extras=extras,
            advance=advance,
        )
        if created.replayed is not None:  # a repeated messageId: the task it started, as it is now
            if created.replayed.request_digest != claim.request_digest:
                raise _reused(message.messageId, created.run.run_id)
            live = await load_task(store, created.run.run_id, principal.tenant)
            return live.run, live.context_id, None
        return created.run, context_id, first

    async def _reply(
        self, principal: Principal, message: Message, push: PushConfigInput | None, advance: bool
    ) -> tuple[RunRow, str]:
        """Resolve the task's pending interrupt with the message; a retried reply is a no-op.

        A messageId already in the task's history (or one that started another task) with
        different content is refused, as a reused messageId is when it starts a task.
        """
        assert message.taskId is not None
        live = await load_task(self.a2a.store, message.taskId, principal.tenant)
        if message.contextId is not None and message.contextId != live.context_id:
            raise InvalidParams(
                f"message.contextId {quote(message.contextId)} is not the context of task "
                f"{quote(live.run.run_id)} ({quote(live.context_id)})",
                data={"contextId": live.context_id},
            )
        entry = _history_entry(message.model_dump(exclude_none=True), live.run.run_id, live.context_id)
        if await self._recorded(live.run.run_id, entry):
            return live.run, live.context_id
        started = await self.a2a.store.get_idempotency(principal.tenant, _start_scope(principal), message.messageId)
        if started is not None and started.run_id != live.run.run_id:
            raise _reused(message.messageId, started.run_id)
        interrupt = self._check_waiting(live)
        value = reply_value(message, interrupt)
        extras: list[Extra] = [TaskMessage(live.run.run_id, message.messageId, entry, clock.now_iso())]
        if push is not None:
            extras.append(seal_config(self.a2a, live.run.run_id, principal.tenant, push))
        try:
            row = await self.a2a.engine.resolve(
                principal,
                live.run.run_id,
                interrupt["nodeId"],
                value,
                interrupt_id=interrupt["interruptId"],
                extras=extras,
                advance=advance,
            )
        except Conflict:  # resolved meanwhile: by this very message (a racing retry) or another
            if await self._recorded(live.run.run_id, entry):
                again = await load_task(self.a2a.store, live.run.run_id, principal.tenant)
                return again.run, again.context_id
            raise
        return row, live.context_id

    async def _recorded(self, task_id: str, entry: dict[str, Any]) -> bool:
        """Whether the task's history holds this message already (InvalidParams if its id holds another)."""
        message_id = entry["messageId"]
        for kept in await self.a2a.store.list_task_messages(task_id):
            if kept.get("messageId") == message_id:
                if _digest(kept) != _digest(entry):
                    raise _reused(message_id, task_id)
                return True
        return False

    @staticmethod
    def _check_waiting(live: LiveTask) -> InterruptRecord:
        """The interrupt a reply answers; refuses a task that is over or waits for nothing."""
        state = task_state(live.run.status)
        task_id = live.run.run_id
        if state in TERMINAL:
            raise UnsupportedOperation(
                f"task {quote(task_id)} is {state}: a terminal task takes no more messages; "
                f"send a new message without taskId (it may reuse contextId {quote(live.context_id)})",
                data={"state": state},
            )
        interrupt = live.run.state.get("interrupt")
        if not interrupt:
            raise UnsupportedOperation(
                f"task {quote(task_id)} is {state} and waits for no input; reply once it is input-required",
                data={"state": state},
            )
        return interrupt

    # tasks/* -------------------------------------------------------------------------------

    async def tasks_get(self, principal: Principal, raw: dict[str, Any]) -> orjson.Fragment:
        params = parse_params(TaskQueryParams, raw)
        live = await load_task(self.a2a.store, params.id, principal.tenant, history=params.historyLength != 0)
        return self.encoded.encode(live, params.historyLength)

    async def tasks_cancel(self, principal: Principal, raw: dict[str, Any]) -> dict[str, Any]:
        """Cancel the run: ``working`` while it is cancelling, ``canceled`` once it is."""
        params = parse_params(TaskIdParams, raw)
        live = await load_task(self.a2a.store, params.id, principal.tenant)
        if live.run.is_terminal:
            raise _not_cancelable(params.id, live.run.status)
        try:
            row = await self.a2a.engine.cancel(principal, params.id, "canceled with A2A tasks/cancel")
        except Conflict as exc:  # it ended between the read and the compare-and-swap
            raise _not_cancelable(params.id, str((exc.details or {}).get("runStatus", "completed"))) from exc
        history = await self.a2a.store.list_task_messages(params.id)
        return task(row, live.context_id, history)

    async def tasks_resubscribe(self, principal: Principal, raw: dict[str, Any], last_event_id: str | None) -> Stream:
        """Re-attach: the current Task then its updates, or exactly the events after a sequence.

        Reading never executes anything. The stream stays attached through
        input-required and ends at a terminal state; on a task that already ended, the
        final Task is the only event.
        """
        params = parse_params(TaskIdParams, raw)
        live = await load_task(self.a2a.store, params.id, principal.tenant)
        after = parse_after(last_event_id, params.metadata, live.run)
        if after is not None:
            return Stream(replay(self.a2a, self.projections, live.run, live.context_id, after))
        history = await self.a2a.store.list_task_messages(params.id)
        return Stream(
            task_first(
                self.a2a, self.projections, live.run, live.context_id, history, None, final_on_input_required=False
            )
        )

    # tasks/pushNotificationConfig/* ---------------------------------------------------------

    async def push_config(
        self, principal: Principal, method: str, raw: dict[str, Any]
    ) -> dict[str, Any] | list[dict[str, Any]] | None:
        """set / get / list / delete a task's push configs (another tenant's task reads as unknown)."""
        store = self.a2a.store
        if method == "tasks/pushNotificationConfig/set":
            params = parse_params(SetPushParams, raw)
            push = parse_params(PushConfigInput, params.pushNotificationConfig)
            await check_push_url(self.a2a, push.url)
            await load_task(store, params.taskId, principal.tenant)
            row = seal_config(self.a2a, params.taskId, principal.tenant, push)
            await store.put_push_config(row)
            return config_view(row)
        if method == "tasks/pushNotificationConfig/list":
            listed = parse_params(TaskIdParams, raw)
            await load_task(store, listed.id, principal.tenant)
            return [config_view(row) for row in await store.list_push_configs(listed.id)]
        if method == "tasks/pushNotificationConfig/get":
            got = parse_params(GetPushParams, raw)
            await load_task(store, got.id, principal.tenant)
            configs = await store.list_push_configs(got.id)
            chosen = [c for c in configs if got.pushNotificationConfigId in (None, c.config_id)]
            if not chosen:
                wanted = f" {quote(got.pushNotificationConfigId)}" if got.pushNotificationConfigId else ""
                raise InvalidParams(f"task {quote(got.id)} has no push config{wanted}", data={"taskId": got.id})
            return config_view(chosen[0])
        deleted = parse_params(DeletePushParams, raw)
        await load_task(store, deleted.id, principal.tenant)
        await store.delete_push_config(deleted.id, deleted.pushNotificationConfigId)
        return None
