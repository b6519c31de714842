"""The A2A 1.0 interface the OpenWOP v2 root advertises: the same 1.0 methods, every task id the bound run id.

OpenWOP v2 names a run ``<tenant>/<opaque>`` everywhere (RFC 0184), and RFC 0208 maps an
A2A task onto a run, so on the interface a v2 host advertises ``Task.id`` is the bound
run id, ``default/run_01a2…``. Tether keeps storing bare ids; this module binds them at
the edge, around the 1.0 codec's methods, and nowhere else:

- **in**: a task id a request names (``id``, ``taskId``, ``message.taskId``) is read as a
  bound id of the caller's tenant. One bound to another tenant is answered exactly as an
  unknown task of the caller's own (``-32001``, the same message and details, quoting the
  id as it was sent), so the answer says nothing about other tenants. A bare id still
  resolves under the caller's tenant, as a bare id in a v2 path does.
- **out**: every task id an answer names (a Task's ``id``, each ``taskId`` of a message,
  an update or a push config) is bound, in whole answers, in every streamed frame and in
  the pushes of a config registered here (:data:`BOUND_VERSION`, :func:`bound_push`).

Errors keep the A2A 1.0 shape the codec gives them (``error.data`` an array with one
``google.rpc.ErrorInfo``); a refusal that quotes a task id quotes it as the caller sent it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

from tether.a2a.calls import Call, Method, Methods, Stream
from tether.a2a.errors import A2AError, TaskNotFound, clip, quote
from tether.a2a.streams import Frame

__all__ = ["BOUND_VERSION", "bind", "bind_ids", "bound_methods", "unbind"]

#: the version a push config registered on this interface is kept under: 1.0 shapes, bound task ids
BOUND_VERSION = "1.0+bound"
#: members never searched for task ids: what a caller or a workflow wrote (and file bytes)
_OPAQUE = frozenset({"metadata", "parts", "artifacts", "artifact"})


def bind(task_id: str, tenant: str) -> str:
    """The bound form of a stored (bare) task id; one already bound is returned as it is."""
    return task_id if "/" in task_id else f"{tenant}/{task_id}"


def _unknown(wire: str) -> TaskNotFound:
    """What an unreadable task id is answered with: the words the service uses for a missing one."""
    return TaskNotFound(
        f"task {quote(wire)} not found: no task with that id is visible to this caller", data={"taskId": clip(wire)}
    )


def unbind(wire: str, tenant: str) -> str:
    """The stored id a request's task id names: its opaque part when bound to ``tenant``.

    Raises
    ------
    TaskNotFound
        When it is bound to another tenant: exactly as an unknown task is answered.
    """
    if "/" not in wire:
        return wire
    owner, _, opaque = wire.partition("/")
    if owner != tenant or not opaque:
        raise _unknown(wire)
    return opaque


def bind_ids(doc: Any, tenant: str) -> Any:
    """``doc`` (a ProtoJSON answer, frame or push body) with every task id it names bound to ``tenant``."""
    if isinstance(doc, list):
        return [bind_ids(item, tenant) for item in doc]
    if not isinstance(doc, dict):
        return doc
    is_task = "status" in doc and "contextId" in doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, str) and (key == "taskId" or (key == "id" and is_task)):
            out[key] = bind(value, tenant)
        elif key in _OPAQUE or not isinstance(value, dict | list):
            out[key] = value
        else:
            out[key] = bind_ids(value, tenant)
    return out


def _plain(value: Any) -> Any:
    """A codec's answer as plain JSON data (an encoded Task is a ``Fragment``: re-read it)."""
    return orjson.loads(orjson.dumps(value)) if isinstance(value, orjson.Fragment) else value


#: where each method names a task: a path of keys into its params
_TASK_PARAM: dict[str, tuple[str, ...]] = {
    "SendMessage": ("message", "taskId"),
    "SendStreamingMessage": ("message", "taskId"),
    "GetTask": ("id",),
    "CancelTask": ("id",),
    "SubscribeToTask": ("id",),
    "CreateTaskPushNotificationConfig": ("taskId",),
    "GetTaskPushNotificationConfig": ("taskId",),
    "ListTaskPushNotificationConfigs": ("taskId",),
    "DeleteTaskPushNotificationConfig": ("taskId",),
}


def _named(params: dict[str, Any], path: tuple[str, ...]) -> tuple[dict[str, Any], str] | None:
    """The object holding the task id at ``path`` and the id, when the params name one."""
    holder: Any = params
    for key in path[:-1]:
        holder = holder.get(key) if isinstance(holder, dict) else None
    value = holder.get(path[-1]) if isinstance(holder, dict) else None
    return (holder, value) if isinstance(value, str) and value else None


def _with_task(params: dict[str, Any], path: tuple[str, ...], stored: str) -> dict[str, Any]:
    """A copy of ``params`` naming ``stored`` at ``path`` (the caller's params are left as sent)."""
    if len(path) == 1:
        return {**params, path[0]: stored}
    return {**params, path[0]: _with_task(params[path[0]], path[1:], stored)}


def _requoted(error: A2AError, stored: str, wire: str) -> A2AError:
    """``error`` quoting the task id as the caller sent it, not as it is stored."""
    if stored == wire:
        return error
    error.message = error.message.replace(quote(stored), quote(wire))
    if isinstance(error.data, dict) and error.data.get("taskId") == clip(stored):
        error.data = {**error.data, "taskId": clip(wire)}
    return error


async def _bound_frames(frames: AsyncIterator[list[Frame]], tenant: str) -> AsyncIterator[list[Frame]]:
    async for batch in frames:
        yield [(None if p is None else bind_ids(_plain(p), tenant), sequence) for p, sequence in batch]


def _bound_run(name: str, run: Callable[[Call], Awaitable[Any]]) -> Callable[[Call], Awaitable[Any]]:
    path = _TASK_PARAM.get(name)

    async def bound(call: Call) -> Any:
        tenant = call.principal.tenant
        named = _named(call.params, path) if path is not None else None
        stored = wire = ""
        if path is not None and named is not None:
            wire = named[1]
            stored = unbind(wire, tenant)
            call = dataclasses.replace(call, params=_with_task(call.params, path, stored))
        try:
            outcome = await run(call)
        except A2AError as error:
            raise _requoted(error, stored, wire) from None
        if isinstance(outcome, Stream):
            return Stream(_bound_frames(outcome.frames, tenant))
        return bind_ids(_plain(outcome), tenant)

    return bound


def bound_methods(methods: Methods, extended_card: Callable[[Call], Awaitable[Any]] | None = None) -> Methods:
    """The 1.0 ``methods`` as the v2-advertised interface serves them: task ids bound in and out.

    ``extended_card``: what ``GetExtendedAgentCard`` answers here (the card naming this interface).
    """
    table: dict[str, Method] = {}
    for name, method in methods.items():
        run = extended_card if name == "GetExtendedAgentCard" and extended_card is not None else method.run
        table[name] = dataclasses.replace(method, run=_bound_run(name, run))
    return table


def bound_push(body: dict[str, Any], tenant: str) -> dict[str, Any]:
    """A push body (a ``StreamResponse``) for a config registered on this interface: its task ids bound."""
    bound: dict[str, Any] = bind_ids(body, tenant)
    return bound
