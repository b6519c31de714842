"""The A2A 0.3 codec: the slash-named JSON-RPC methods, in the wire shapes 0.3 clients know.

0.3 shapes are Tether's canonical ones (:mod:`tether.a2a.message`, :mod:`tether.a2a.projection`),
so this codec parses strictly and renders as is; every rule it applies lives in the service.
"""

from __future__ import annotations

from typing import Any

from tether.a2a.calls import Call, Method, Methods, Stream, message_scope
from tether.a2a.card import agent_card
from tether.a2a.errors import ExtendedCardNotConfigured, InvalidParams, quote
from tether.a2a.message import parse_params
from tether.a2a.projection import task
from tether.a2a.push import PushConfigInput, config_view
from tether.a2a.service import A2AService, SendRequest
from tether.a2a.streams import StreamProjections, parse_after
from tether.a2a.tasks import EncodedTasks
from tether.a2a.v0_3.params import (
    DeletePushParams,
    GetPushParams,
    SetPushParams,
    TaskIdParams,
    TaskQueryParams,
    parse_send_params,
)
from tether.a2a.versions import Version

__all__ = ["V03Codec"]

VERSION = Version.V0_3.value


def _send_request(raw: dict[str, Any]) -> SendRequest:
    params = parse_send_params(raw)
    config = params.configuration
    push = None
    if config is not None and config.pushNotificationConfig is not None:
        push = parse_params(PushConfigInput, config.pushNotificationConfig)
    return SendRequest(
        message=params.message,
        version=VERSION,
        metadata=params.metadata,
        history_length=config.historyLength if config else None,
        blocking=config is None or config.blocking is not False,
        push=push,
        accepted_output_modes=config.acceptedOutputModes if config else None,
    )


def _check_set(raw: dict[str, Any]) -> None:
    checked = parse_params(SetPushParams, raw)
    parse_params(PushConfigInput, checked.pushNotificationConfig)


def _const(scope: str | None) -> Any:
    return lambda _params: scope


class V03Codec:
    """The 0.3 methods of one host (it keeps the 0.3 encodings of tasks and stream events)."""

    def __init__(self, service: A2AService) -> None:
        self.service = service
        self.encoded = EncodedTasks(service.files)
        self.projections = StreamProjections()
        self.methods: Methods = {
            "message/send": Method(self.send, message_scope, check=_send_request),
            "message/stream": Method(self.stream, message_scope, streaming=True, check=_send_request),
            "tasks/get": Method(self.get, _const("runs:read"), check=lambda p: parse_params(TaskQueryParams, p)),
            "tasks/cancel": Method(self.cancel, _const("runs:cancel"), check=lambda p: parse_params(TaskIdParams, p)),
            "tasks/resubscribe": Method(
                self.resubscribe, _const("runs:read"), streaming=True, check=lambda p: parse_params(TaskIdParams, p)
            ),
            "tasks/pushNotificationConfig/set": Method(self.set_push, _const("runs:create"), check=_check_set),
            "tasks/pushNotificationConfig/get": Method(
                self.get_push, _const("runs:read"), check=lambda p: parse_params(GetPushParams, p)
            ),
            "tasks/pushNotificationConfig/list": Method(
                self.list_push, _const("runs:read"), check=lambda p: parse_params(TaskIdParams, p)
            ),
            "tasks/pushNotificationConfig/delete": Method(
                self.delete_push, _const("runs:create"), check=lambda p: parse_params(DeletePushParams, p)
            ),
            "agent/getAuthenticatedExtendedCard": Method(self.extended_card, _const(None), keyed=True),
        }

    async def send(self, call: Call) -> dict[str, Any]:
        request = _send_request(call.params)
        sent = await self.service.send(call.principal, request)
        return await self.service.files.inline(
            sent.run.run_id, task(sent.run, sent.context_id, sent.history, request.history_length)
        )

    async def stream(self, call: Call) -> Stream:
        request = _send_request(call.params)
        return Stream(await self.service.stream(call.principal, request, self.projections))

    async def get(self, call: Call) -> Any:
        params = parse_params(TaskQueryParams, call.params)
        live = await self.service.get(call.principal, params.id, history=params.historyLength != 0)
        return await self.encoded.encode(live, params.historyLength)

    async def cancel(self, call: Call) -> dict[str, Any]:
        params = parse_params(TaskIdParams, call.params)
        done = await self.service.cancel(call.principal, params.id)
        return await self.service.files.inline(done.run.run_id, task(done.run, done.context_id, done.history))

    async def resubscribe(self, call: Call) -> Stream:
        """The current Task then its updates, or exactly the events after ``Last-Event-ID``
        (or ``metadata.lastSequence``); a task that ended gives its final Task alone."""
        params = parse_params(TaskIdParams, call.params)
        live = await self.service.get(call.principal, params.id, history=False)
        after = parse_after(call.last_event_id, params.metadata, live.run)
        return Stream(await self.service.subscribe(live, after, self.projections))

    async def set_push(self, call: Call) -> dict[str, Any]:
        params = parse_params(SetPushParams, call.params)
        push = parse_params(PushConfigInput, params.pushNotificationConfig)
        return config_view(await self.service.set_push(call.principal, params.taskId, push, VERSION))

    async def get_push(self, call: Call) -> dict[str, Any]:
        params = parse_params(GetPushParams, call.params)
        found = await self.service.get_push(call.principal, params.id, params.pushNotificationConfigId)
        if found is None:
            wanted = f" {quote(params.pushNotificationConfigId)}" if params.pushNotificationConfigId else ""
            raise InvalidParams(f"task {quote(params.id)} has no push config{wanted}", data={"taskId": params.id})
        return config_view(found)

    async def list_push(self, call: Call) -> list[dict[str, Any]]:
        params = parse_params(TaskIdParams, call.params)
        return [config_view(row) for row in await self.service.list_push(call.principal, params.id)]

    async def delete_push(self, call: Call) -> None:
        params = parse_params(DeletePushParams, call.params)
        await self.service.delete_push(call.principal, params.id, params.pushNotificationConfigId)

    async def extended_card(self, call: Call) -> dict[str, Any]:
        """The card a key holder sees: the public one, which is complete (1.0 callers get it too)."""
        a2a = self.service.a2a
        if not a2a.capabilities.extended_card:
            raise ExtendedCardNotConfigured(
                "this agent has no extended card: the public card at /.well-known/agent-card.json is complete"
            )
        return agent_card(
            a2a.capabilities, a2a.registry, a2a.settings.default_skill, anonymous=a2a.anonymous, keyed=True
        )
