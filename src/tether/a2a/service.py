"""The A2A task semantics, once, for every version and binding: no HTTP and no wire shapes here.

A message without a ``taskId`` starts a run of the named skill; with one, it answers the
run's pending interrupt. Either way the user's message is stored as task history in the
same commit, a repeated ``messageId`` changes nothing (and one reused for different
content is refused), and the answer is the run, from which a codec renders a Task.
Requests arrive already parsed into the canonical shapes of :mod:`tether.a2a.message`
(a 0.3 codec reads them as they are, the 1.0 codec translates ProtoJSON into them), and
results leave as rows and canonical dicts that each codec renders in its own version. A
message's file bytes become blobs here, within the operator's limits, before anything is
written; the task keeps references, which renderings turn back into bytes (``self.files``).
Refusals are the A2A errors of :mod:`tether.a2a.errors`, never a wire's; domain errors
(``TetherError``) propagate, and the bindings turn them into A2A errors in one place,
:func:`tether.a2a.errors.a2a_error_from`.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from tether import clock
from tether.a2a.errors import (
    ContentTypeNotSupported,
    InvalidParams,
    PushNotificationNotSupported,
    TaskNotCancelable,
    UnsupportedOperation,
    clip,
    quote,
)
from tether.a2a.files import FileBytes, FileLimits, stored_message
from tether.a2a.message import Message, message_inputs, reply_value
from tether.a2a.projection import INTERRUPTED, TERMINAL, task_state
from tether.a2a.push import PushConfigInput, check_push_url, seal_config
from tether.a2a.skills import OUTPUT_MODES, resolve_skill
from tether.a2a.streams import Frame, StreamProjections, replay, task_first
from tether.a2a.surface import A2ASurface
from tether.a2a.tasks import A2A_TRANSPORT, LiveTask, a2a_metadata, load_task
from tether.engine.engine import IdempotencyClaim
from tether.errors import Conflict
from tether.ids import new_id
from tether.run_state import InterruptRecord
from tether.store.base import Extra, PushConfigRow, RunRow, TaskMessage
from tether.types import Principal

__all__ = ["A2AService", "SendRequest", "Sent", "TaskPage", "TaskQuery"]

_MODE_ALIASES = {"text": "text/plain", "json": "application/json", "data": "application/json"}
#: ListTasks pages: at most this many tasks, this many unless asked otherwise
PAGE_MAX = 100
PAGE_DEFAULT = 50


@dataclass(frozen=True, slots=True)
class SendRequest:
    """A message to send, in any version: a new task's first message or a reply to a waiting one."""

    message: Message
    #: the wire version the message came in (a push config given with it answers in that version)
    version: str
    metadata: dict[str, Any] | None = None
    history_length: int | None = None
    #: wait until the task ends or waits for input (0.3 ``blocking``, 1.0 ``not returnImmediately``)
    blocking: bool = True
    push: PushConfigInput | None = None
    accepted_output_modes: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Sent:
    """What a send did: the run as it is now, its context and, when known without a read, its history."""

    run: RunRow
    context_id: str
    history: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """A ListTasks filter; ``after`` is the cursor a previous page handed out."""

    context_id: str | None = None
    state: str | None = None
    updated_after: str | None = None
    page_size: int = PAGE_DEFAULT
    after: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: list[LiveTask]
    #: the cursor of the next page, None on the last
    next_after: tuple[str, str] | None
    total: int


def page_token(after: tuple[str, str] | None) -> str:
    """The opaque ``nextPageToken`` of a cursor ("" on the last page)."""
    if after is None:
        return ""
    return base64.urlsafe_b64encode(orjson.dumps(list(after))).decode().rstrip("=")


def parse_page_token(token: str | None) -> tuple[str, str] | None:
    """The cursor of a ``pageToken``; InvalidParams for one this host never handed out."""
    if not token:
        return None
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        decoded = None
    if not (isinstance(decoded, list) and len(decoded) == 2 and all(isinstance(v, str) for v in decoded)):
        raise InvalidParams(
            f"pageToken {quote(token)} is not one this agent handed out: pass a nextPageToken back unchanged",
            data={"field": "pageToken"},
        )
    return decoded[0], decoded[1]


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
    messageId), every client knows the code, and A2A keeps allotting codes from -32001
    up, so a code of our own could collide with a later version's. ``data.reason`` is
    REST's error code.
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


class A2AService:
    """The A2A operations of one host, whatever version or binding asks for them."""

    def __init__(self, a2a: A2ASurface) -> None:
        self.a2a = a2a
        self.capabilities = a2a.capabilities
        self.limits = FileLimits.of(a2a.settings)
        #: the bytes of file parts, for every version's renderings of tasks and updates
        self.files = FileBytes(a2a.store)

    # sending --------------------------------------------------------------------------------

    def check_send(self, request: SendRequest) -> None:
        """Refuse what this agent cannot serve before anything runs (a push config, output modes)."""
        if request.push is not None and not self.capabilities.push_notifications:
            raise PushNotificationNotSupported(
                "a push config was given with the message, but this agent does not deliver push notifications "
                "(capabilities.pushNotifications is false): leave it out and poll the task or stream it"
            )
        modes = request.accepted_output_modes
        if modes:
            accepted = {_MODE_ALIASES.get(m, m) for m in modes}
            if not accepted & {*OUTPUT_MODES, "*/*", "*"}:
                raise ContentTypeNotSupported(
                    f"this agent answers in {' and '.join(OUTPUT_MODES)}; "
                    f"acceptedOutputModes {clip(str(modes))} accepts neither",
                    data={"outputModes": list(OUTPUT_MODES)},
                )

    async def send(self, principal: Principal, request: SendRequest) -> Sent:
        """Start a task or answer one; a blocking send returns once it ends or waits for input."""
        self.check_send(request)
        sent = await self._deliver(principal, request, advance=request.blocking)
        row = sent.run
        if request.blocking and not _settled(row):
            row = await self.a2a.engine.wait_for(row.run_id, _settled, self.a2a.settings.a2a_request_timeout) or row
        history = sent.history if sent.history else await self.a2a.store.list_task_messages(row.run_id)
        return Sent(row, sent.context_id, history)

    async def stream(
        self, principal: Principal, request: SendRequest, projections: StreamProjections
    ) -> AsyncIterator[list[Frame]]:
        """Start a task or answer one, then its Task and updates until it ends or waits for input."""
        self.check_send(request)
        sent = await self._deliver(principal, request)
        history = sent.history if sent.history else await self.a2a.store.list_task_messages(sent.run.run_id)
        return task_first(
            self.a2a,
            projections,
            self.files,
            sent.run,
            sent.context_id,
            history,
            request.history_length,
            final_on_input_required=True,
        )

    async def _deliver(self, principal: Principal, request: SendRequest, *, advance: bool = False) -> Sent:
        """Start a run or answer one (its history is empty when it is not known without a read).

        ``advance``: the caller waits for the outcome anyway.
        """
        push = request.push
        if push is not None:  # checked by the egress guard before anything is written
            await check_push_url(self.a2a, push.url)
        if request.message.taskId is not None:
            row, context_id = await self._reply(principal, request, advance)
            return Sent(row, context_id, [])
        return await self._start(principal, request, advance)

    async def _start(self, principal: Principal, request: SendRequest, advance: bool) -> Sent:
        """Start the skill's run; a (principal, messageId) seen before returns its task, if the message is the same."""
        message = request.message
        store = self.a2a.store
        workflow_id = resolve_skill(
            self.a2a.registry,
            self.a2a.settings.default_skill,
            message.metadata,
            request.metadata,
            only=self.a2a.settings.a2a_skills,
        )
        stored = await stored_message(message, self.limits, request.version)  # file bytes made blobs, within limits
        dumped = stored.doc
        context_id = message.contextId or new_id("ctx_")
        run_id = new_id("run_")
        answer = {"taskId": run_id, "contextId": context_id}
        claim = IdempotencyClaim(_start_scope(principal), message.messageId, _digest(dumped), 200, answer)
        # the history entry, any push config and the file bytes, written with the run
        first = [_history_entry(dumped, run_id, context_id)]
        inputs = message_inputs(message, first[0])
        extras: list[Extra] = [TaskMessage(run_id, message.messageId, first[0], clock.now_iso())]
        if request.push is not None:
            extras.append(seal_config(self.a2a, run_id, principal.tenant, request.push, request.version))
        created = await self.a2a.engine.create_run(
            principal,
            workflow_id,
            inputs,
            run_id=run_id,
            tags=[f"a2a:{message.messageId}", f"a2a:{context_id}"],
            metadata=a2a_metadata(context_id, message.messageId, workflow_id, self._steps(workflow_id)),
            transport=A2A_TRANSPORT,
            idempotency=claim,
            extras=extras,
            blobs=stored.blobs,
            advance=advance,
        )
        if created.replayed is not None:  # a repeated messageId: the task it started, as it is now
            if created.replayed.request_digest != claim.request_digest:
                raise _reused(message.messageId, created.run.run_id)
            live = await load_task(store, created.run.run_id, principal.tenant)
            return Sent(live.run, live.context_id, [])
        return Sent(created.run, context_id, first)

    def _steps(self, workflow_id: str) -> dict[str, str]:
        nodes = self.a2a.registry.get(workflow_id).workflow.nodes
        return {node.id: node.name or node.id for node in nodes}

    async def _reply(self, principal: Principal, request: SendRequest, advance: bool) -> tuple[RunRow, str]:
        """Resolve the task's pending interrupt with the message; a retried reply is a no-op.

        A messageId already in the task's history (or one that started another task) with
        different content is refused, as a reused messageId is when it starts a task.
        """
        message = request.message
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
        if request.push is not None:
            extras.append(seal_config(self.a2a, live.run.run_id, principal.tenant, request.push, request.version))
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

    # reading, cancelling, re-attaching -------------------------------------------------------

    async def get(self, principal: Principal, task_id: str, *, history: bool = True) -> LiveTask:
        """The task as it is now (another tenant's reads as unknown)."""
        return await load_task(self.a2a.store, task_id, principal.tenant, history=history)

    async def list_tasks(self, principal: Principal, query: TaskQuery, *, history: bool) -> TaskPage:
        """The caller's tenant's tasks, most recently updated first, a page at a time."""
        size = max(1, min(query.page_size, PAGE_MAX))
        records, total = await self.a2a.store.list_tasks(
            principal.tenant,
            context_id=query.context_id,
            state=query.state,
            updated_after=query.updated_after,
            after=query.after,
            limit=size + 1,
        )
        more = len(records) > size
        tasks: list[LiveTask] = []
        for record in records[:size]:
            found = await self.a2a.store.read_task(record.task_id, principal.tenant, history=history)
            if found is not None:
                tasks.append(LiveTask(*found))
        last = records[size - 1] if more else None
        return TaskPage(tasks, (last.updated_at, last.task_id) if last is not None else None, total)

    async def cancel(self, principal: Principal, task_id: str) -> Sent:
        """Cancel the run: ``working`` while it is cancelling, ``canceled`` once it is."""
        live = await load_task(self.a2a.store, task_id, principal.tenant)
        if live.run.is_terminal:
            raise _not_cancelable(task_id, live.run.status)
        try:
            row = await self.a2a.engine.cancel(principal, task_id, "canceled with A2A")
        except Conflict as exc:  # it ended between the read and the compare-and-swap
            raise _not_cancelable(task_id, str((exc.details or {}).get("runStatus", "completed"))) from exc
        return Sent(row, live.context_id, await self.a2a.store.list_task_messages(task_id))

    async def subscribe(
        self, live: LiveTask, after: int | None, projections: StreamProjections
    ) -> AsyncIterator[list[Frame]]:
        """Re-attach: the current Task then its updates, or exactly the events after a sequence.

        Reading never executes anything. The stream stays attached through
        input-required and ends at a terminal state; on a task that already ended, the
        final Task is the only event.
        """
        if after is not None:
            return replay(self.a2a, projections, self.files, live.run, live.context_id, after)
        history = await self.a2a.store.list_task_messages(live.run.run_id)
        return task_first(
            self.a2a, projections, self.files, live.run, live.context_id, history, None, final_on_input_required=False
        )

    # push configs ----------------------------------------------------------------------------

    def _check_push(self) -> None:
        if not self.capabilities.push_notifications:
            raise PushNotificationNotSupported(
                "this agent does not deliver push notifications (capabilities.pushNotifications is false): "
                "poll the task or re-attach to its stream"
            )

    async def set_push(self, principal: Principal, task_id: str, push: PushConfigInput, version: str) -> PushConfigRow:
        """Register (or replace) a push config; its URL passes the egress guard first."""
        self._check_push()
        await check_push_url(self.a2a, push.url)
        await load_task(self.a2a.store, task_id, principal.tenant)
        row = seal_config(self.a2a, task_id, principal.tenant, push, version)
        await self.a2a.store.put_push_config(row)
        return row

    async def list_push(self, principal: Principal, task_id: str) -> list[PushConfigRow]:
        self._check_push()
        await load_task(self.a2a.store, task_id, principal.tenant)
        return await self.a2a.store.list_push_configs(task_id)

    async def get_push(self, principal: Principal, task_id: str, config_id: str | None) -> PushConfigRow | None:
        """The config ``config_id`` (the first, when None), or None when the task has no such config."""
        configs = await self.list_push(principal, task_id)
        return next((c for c in configs if config_id in (None, c.config_id)), None)

    async def delete_push(self, principal: Principal, task_id: str, config_id: str) -> None:
        """Forget a config (deleting one that is gone already is not an error)."""
        self._check_push()
        await load_task(self.a2a.store, task_id, principal.tenant)
        await self.a2a.store.delete_push_config(task_id, config_id)
