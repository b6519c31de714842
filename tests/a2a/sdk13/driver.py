"""a2a-sdk 1.3.0, unmodified and with default settings, driving Tether; and the A2A 1.0 proto oracle.

Runs in its own environment (``requirements.txt`` beside it, made by ``tests/sidecars.py``):
the main test environment pins a2a-sdk 0.3.26. It speaks JSON lines on stdin/stdout, one
request at a time::

    → {"id": 1, "op": "connect", "args": {"url": "http://127.0.0.1:PORT", "key": "tk_…"}}
    ← {"id": 1, "result": {...}, "wire": {"checked": 3, "problems": []}}

or ``"error": {"type": "TaskNotFoundError", "message": …}`` when the SDK raised.

Clients are made by ``create_client(url, ClientConfig(httpx_client=…))``: the SDK's
defaults decide everything about the protocol (which interface of the card, which
binding, which version). The one httpx client carries the key as a default header (that
is credentials, not protocol) and a transport that keeps a copy of every byte the host
sends back. The unary client (``streaming=False``) is the same factory told not to
stream, for ``SendMessage`` itself; by default the SDK sends with ``SendStreamingMessage``
when the card says it streams.

**The oracle.** Every response the host sends (the card, each JSON-RPC body, each SSE
event) is checked against a2a-sdk 1.3.0's own protobuf models with
``json_format.Parse(raw, a2a_pb2.<Type>())`` *without* ``ignore_unknown_fields``, so a
field outside the 1.0 proto fails, though the SDK's own lenient parser would drop it. The
problems found are returned with each answer (``wire``). ``validate`` runs the same check
on a document the caller hands over (``tests/a2a/proto_oracle.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import a2a_pb2
from google.protobuf import any_pb2, empty_pb2, json_format
from google.protobuf.message import Message as ProtoMessage
from google.rpc import error_details_pb2  # noqa: F401 (registers google.rpc.ErrorInfo for Any)

#: the result type of each 1.0 JSON-RPC method (a2a.proto's service)
RESULTS: dict[str, str] = {
    "SendMessage": "SendMessageResponse",
    "SendStreamingMessage": "StreamResponse",
    "SubscribeToTask": "StreamResponse",
    "GetTask": "Task",
    "ListTasks": "ListTasksResponse",
    "CancelTask": "Task",
    "CreateTaskPushNotificationConfig": "TaskPushNotificationConfig",
    "GetTaskPushNotificationConfig": "TaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs": "ListTaskPushNotificationConfigsResponse",
    "DeleteTaskPushNotificationConfig": "Empty",
    "GetExtendedAgentCard": "AgentCard",
}
#: the 0.3 top-level keys the one card both generations read may carry (a2a-v1.0-wire §2.4)
LEGACY_CARD_KEYS = frozenset(
    {
        "protocolVersion",
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "security",
        "supportsAuthenticatedExtendedCard",
    }
)
#: the 0.3 flat keys a merged card's security scheme may carry beside its 1.0 member
LEGACY_SCHEME_KEYS = frozenset(
    {"type", "scheme", "bearerFormat", "description", "in", "name", "flows", "openIdConnectUrl", "oauth2MetadataUrl"}
)
_ENVELOPE = frozenset({"jsonrpc", "id", "result", "error"})
_ERROR = frozenset({"code", "message", "data"})
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


# -- the oracle ------------------------------------------------------------------------------


def _model(type_name: str) -> ProtoMessage:
    if type_name == "Empty":
        return empty_pb2.Empty()
    found = getattr(a2a_pb2, type_name, None)
    if found is None or not isinstance(found, type) or not issubclass(found, ProtoMessage):
        raise ValueError(f"a2a_pb2 has no message {type_name!r}")
    return found()


def validate(type_name: str, doc: Any) -> str | None:
    """None when ``doc`` parses strictly as the 1.0 message ``type_name``, else why not."""
    try:
        json_format.Parse(json.dumps(doc), _model(type_name))
    except (json_format.ParseError, ValueError, TypeError) as exc:
        return f"{type_name}: {exc}"
    return None


def validate_merged_card(doc: Any) -> str | None:
    """The card both generations read: strictly a 1.0 AgentCard once the listed 0.3 keys are set aside."""
    if not isinstance(doc, dict):
        return "AgentCard: not an object"
    strict = {k: v for k, v in doc.items() if k not in LEGACY_CARD_KEYS}
    schemes = doc.get("securitySchemes")
    if isinstance(schemes, dict):
        strict["securitySchemes"] = {
            name: {k: v for k, v in scheme.items() if k not in LEGACY_SCHEME_KEYS}
            if isinstance(scheme, dict)
            else scheme
            for name, scheme in schemes.items()
        }
    return validate("AgentCard", strict)


def check_envelope(method: str, doc: Any, *, streamed: bool) -> list[str]:
    """One JSON-RPC 2.0 answer to a 1.0 ``method``: its envelope, then its result or error."""
    if not isinstance(doc, dict):
        return [f"{method}: the answer is not a JSON object: {doc!r:.200}"]
    problems = []
    extra = set(doc) - _ENVELOPE
    if extra:
        problems.append(f"{method}: envelope members outside JSON-RPC 2.0: {sorted(extra)}")
    if doc.get("jsonrpc") != "2.0":
        problems.append(f"{method}: jsonrpc is {doc.get('jsonrpc')!r}")
    if ("result" in doc) == ("error" in doc):
        problems.append(f"{method}: exactly one of result and error must be present")
    if "error" in doc:
        problems += check_error(method, doc["error"])
    elif "result" in doc:
        wanted = "StreamResponse" if streamed else RESULTS.get(method)
        if wanted is None:
            problems.append(f"{method}: not a 1.0 method")
        else:
            problem = validate(wanted, doc["result"])
            if problem:
                problems.append(f"{method}: {problem}")
    return problems


def check_error(method: str, error: Any) -> list[str]:
    """A 1.0 JSON-RPC error: code, message, and ``data`` as typed details (each a ProtoJSON Any)."""
    if not isinstance(error, dict):
        return [f"{method}: error is not an object"]
    problems = []
    extra = set(error) - _ERROR
    if extra:
        problems.append(f"{method}: error members other than code, message, data: {sorted(extra)}")
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        problems.append(f"{method}: error.code {code!r} is not an integer")
    if not isinstance(error.get("message"), str):
        problems.append(f"{method}: error.message is not a string")
    data = error.get("data")
    if data is None:
        details: list[Any] = []
    elif not isinstance(data, list):
        problems.append(f"{method}: error.data is not an array of typed details: {data!r:.200}")
        details = []
    else:
        details = data
    for detail in details:
        problem = validate_any(detail)
        if problem:
            problems.append(f"{method}: error.data: {problem}")
    if isinstance(code, int) and -32099 <= code <= -32001:
        infos = [d for d in details if isinstance(d, dict) and d.get("@type") == _ERROR_INFO]
        if not any(i.get("domain") == "a2a-protocol.org" and i.get("reason") for i in infos):
            problems.append(f"{method}: A2A error {code} carries no google.rpc.ErrorInfo of domain a2a-protocol.org")
    return problems


def validate_any(doc: Any) -> str | None:
    """A typed detail: a ProtoJSON ``google.protobuf.Any`` whose type is known (ErrorInfo, BadRequest …)."""
    try:
        json_format.Parse(json.dumps(doc), any_pb2.Any())
    except (json_format.ParseError, TypeError) as exc:
        return f"Any: {exc}"
    return None


def sse_events(body: bytes) -> list[str]:
    """The ``data`` of each server-sent event (comments and other fields set aside)."""
    events: list[str] = []
    data: list[str] = []
    for line in body.decode("utf-8").splitlines():
        if not line:
            if data:
                events.append("\n".join(data))
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        events.append("\n".join(data))
    return events


@dataclass
class Exchange:
    """One HTTP exchange as it crossed the wire."""

    method: str
    url: str
    request: bytes
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def check(self) -> list[str]:
        """Every problem the oracle finds in the host's answer."""
        if self.method == "GET" and self.url.endswith("/.well-known/agent-card.json"):
            if self.status != 200:
                return [f"card: HTTP {self.status}"]
            problem = validate_merged_card(json.loads(self.body))
            return [f"card: {problem}"] if problem else []
        call = json.loads(self.request)
        rpc = call.get("method", "?")
        problems = []
        if self.status != 200:
            problems.append(f"{rpc}: HTTP {self.status} {self.body[:200]!r}")
            return problems
        if self.headers.get("a2a-version") != "1.0":
            problems.append(f"{rpc}: answered with A2A-Version {self.headers.get('a2a-version')!r}, not 1.0")
        if "text/event-stream" in self.headers.get("content-type", ""):
            events = sse_events(self.body)
            if not events:
                problems.append(f"{rpc}: an empty event stream")
            for event in events:
                problems += check_envelope(rpc, json.loads(event), streamed=True)
        else:
            problems += check_envelope(rpc, json.loads(self.body), streamed=False)
        return problems

    def summary(self) -> dict[str, Any]:
        """What the test side sees of it: the raw JSON answers, decoded."""
        if "text/event-stream" in self.headers.get("content-type", ""):
            answers = [json.loads(e) for e in sse_events(self.body)]
        else:
            answers = [json.loads(self.body)] if self.body else []
        rpc = json.loads(self.request).get("method") if self.request else None
        return {"method": rpc or self.method, "status": self.status, "answers": answers}


class _Tee(httpx.AsyncByteStream):
    """A response body passed through unchanged, a copy kept for the oracle."""

    def __init__(self, inner: httpx.AsyncByteStream, exchange: Exchange) -> None:
        self.inner = inner
        self.exchange = exchange
        self.chunks: list[bytes] = []

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.chunks.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        self.exchange.body = b"".join(self.chunks)
        await self.inner.aclose()


class Recording(httpx.AsyncBaseTransport):
    """The default transport, recording every exchange (``exchanges``) for the oracle."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = Exchange(request.method, str(request.url), await request.aread())
        self.exchanges.append(exchange)
        response = await self.inner.handle_async_request(request)
        exchange.status = response.status_code
        exchange.headers = {k.lower(): v for k, v in response.headers.items()}
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, exchange),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- the SDK side ----------------------------------------------------------------------------


@dataclass
class Session:
    """One caller (one key): the SDK's default client, its unary twin, and what crossed the wire."""

    default: Client
    unary: Client
    http: httpx.AsyncClient
    wire: Recording


def _dict(message: ProtoMessage) -> dict[str, Any]:
    value: dict[str, Any] = json_format.MessageToDict(message)
    return value


def user_message(args: dict[str, Any]) -> a2a_pb2.Message:
    """A ROLE_USER message from ``text``, ``files`` (parts in ProtoJSON: ``raw`` base64 or ``url``, with
    ``filename`` and ``mediaType``), ``data``, ``skill``, ``task_id``, ``context_id``, ``message_id``."""
    msg = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id=args.get("message_id") or f"sdk13-{uuid.uuid4()}")
    if args.get("text") is not None:
        msg.parts.add(text=args["text"])
    for file in args.get("files") or ():
        json_format.ParseDict(file, msg.parts.add())
    if args.get("data") is not None or (args.get("text") is None and not args.get("files")):
        part = msg.parts.add()
        json_format.ParseDict({"data": args.get("data") or {}}, part)
    if args.get("task_id"):
        msg.task_id = args["task_id"]
    if args.get("context_id"):
        msg.context_id = args["context_id"]
    if args.get("skill"):
        msg.metadata.update({"skillId": args["skill"]})
    return msg


def push_config(args: dict[str, Any]) -> a2a_pb2.TaskPushNotificationConfig:
    config = a2a_pb2.TaskPushNotificationConfig(url=args["url"])
    for name in ("task_id", "id", "token"):
        if args.get(name):
            setattr(config, name, args[name])
    if args.get("scheme"):
        config.authentication.scheme = args["scheme"]
        if args.get("credentials"):
            config.authentication.credentials = args["credentials"]
    return config


def _state(event: a2a_pb2.StreamResponse) -> str | None:
    if event.HasField("task"):
        return a2a_pb2.TaskState.Name(event.task.status.state)
    if event.HasField("status_update"):
        return a2a_pb2.TaskState.Name(event.status_update.status.state)
    return None


class Driver:
    """The ops the tests call; each returns JSON."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}

    async def close(self) -> None:
        for session in self.sessions.values():
            await session.default.close()
            await session.unary.close()
            await session.http.aclose()

    def session(self, args: dict[str, Any]) -> Session:
        return self.sessions[args.get("as", "main")]

    async def op_connect(self, args: dict[str, Any]) -> dict[str, Any]:
        """Resolve the card at ``url`` with the SDK's defaults; say which transport and interface it chose."""
        name = args.get("as", "main")
        if name in self.sessions:
            old = self.sessions.pop(name)
            await old.http.aclose()
        wire = Recording()
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {args['key']}"}, transport=wire, timeout=60)
        default = await create_client(args["url"], client_config=ClientConfig(httpx_client=http))
        unary = await create_client(args["url"], client_config=ClientConfig(httpx_client=http, streaming=False))
        self.sessions[name] = Session(default, unary, http, wire)
        chosen = []
        for client in (default, unary):
            transport = client._transport  # noqa: SLF001 (which transport the factory chose is the point)
            chosen.append(
                {"transport": f"{type(transport).__module__}.{type(transport).__name__}", "url": transport.url}
            )
        card = default._transport.agent_card  # noqa: SLF001 (the card the factory chose from)
        return {"chosen": chosen, "card": _dict(card), "versionHeader": http.headers.get("A2A-Version")}

    async def op_disconnect(self, args: dict[str, Any]) -> dict[str, Any]:
        """Close this caller's clients and connections: the caller walks away."""
        session = self.sessions.pop(args.get("as", "main"))
        await session.default.close()
        await session.unary.close()
        await session.http.aclose()
        return {"closed": len(session.wire.exchanges)}

    async def op_send(self, args: dict[str, Any]) -> dict[str, Any]:
        """A message: streamed (the SDK's default) or unary; ``return_immediately`` and ``history_length`` too."""
        session = self.session(args)
        request = a2a_pb2.SendMessageRequest(message=user_message(args))
        if args.get("return_immediately"):
            request.configuration.return_immediately = True
        if args.get("history_length") is not None:
            request.configuration.history_length = args["history_length"]
        if args.get("push"):
            request.configuration.task_push_notification_config.CopyFrom(push_config(args["push"]))
        client = session.default if args.get("stream", True) else session.unary
        events = [_dict(e) async for e in client.send_message(request)]
        return {"events": events}

    async def op_get(self, args: dict[str, Any]) -> dict[str, Any]:
        request = a2a_pb2.GetTaskRequest(id=args["id"])
        if args.get("history_length") is not None:
            request.history_length = args["history_length"]
        return _dict(await self.session(args).default.get_task(request))

    async def op_list(self, args: dict[str, Any]) -> dict[str, Any]:
        request = a2a_pb2.ListTasksRequest()
        for name in ("page_size", "page_token", "context_id", "history_length", "include_artifacts"):
            if args.get(name) is not None:
                setattr(request, name, args[name])
        if args.get("status"):
            request.status = a2a_pb2.TaskState.Value(args["status"])
        return _dict(await self.session(args).default.list_tasks(request))

    async def op_cancel(self, args: dict[str, Any]) -> dict[str, Any]:
        return _dict(await self.session(args).default.cancel_task(a2a_pb2.CancelTaskRequest(id=args["id"])))

    async def op_subscribe(self, args: dict[str, Any]) -> dict[str, Any]:
        """Every event of ``SubscribeToTask`` until the host closes the stream.

        With ``reply``, the first time the stream shows ``reply.when`` the same session
        sends ``reply.data`` to the task over another call (a unary, non-blocking
        SendMessage) while the stream stays attached.
        """
        session = self.session(args)
        reply = args.get("reply")
        replying: asyncio.Task[Any] | None = None
        events = []
        async for event in session.default.subscribe(a2a_pb2.SubscribeToTaskRequest(id=args["id"])):
            events.append(_dict(event))
            if reply and replying is None and _state(event) == reply["when"]:
                request = a2a_pb2.SendMessageRequest(
                    message=user_message({"data": reply["data"], "task_id": args["id"]})
                )
                request.configuration.return_immediately = True
                replying = asyncio.ensure_future(self._collect(session.unary.send_message(request)))
        replied = await replying if replying is not None else None
        return {"events": events, "reply": replied}

    @staticmethod
    async def _collect(events: AsyncIterator[a2a_pb2.StreamResponse]) -> list[dict[str, Any]]:
        return [_dict(e) async for e in events]

    async def op_push_create(self, args: dict[str, Any]) -> dict[str, Any]:
        config = push_config(args)
        return _dict(await self.session(args).default.create_task_push_notification_config(config))

    async def op_push_get(self, args: dict[str, Any]) -> dict[str, Any]:
        request = a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=args["task_id"], id=args["id"])
        return _dict(await self.session(args).default.get_task_push_notification_config(request))

    async def op_push_list(self, args: dict[str, Any]) -> dict[str, Any]:
        request = a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=args["task_id"])
        return _dict(await self.session(args).default.list_task_push_notification_configs(request))

    async def op_push_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        request = a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=args["task_id"], id=args["id"])
        await self.session(args).default.delete_task_push_notification_config(request)
        return {}

    async def op_extended_card(self, args: dict[str, Any]) -> dict[str, Any]:
        card = await self.session(args).default.get_extended_agent_card(a2a_pb2.GetExtendedAgentCardRequest())
        return _dict(card)

    async def op_validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The oracle alone: ``type`` (an a2a_pb2 message, ``Empty``, ``AgentCard+0.3``, ``Any`` or
        ``JsonRpc:<1.0 method>`` / ``JsonRpcStream:<method>`` for a whole answer) against ``doc``."""
        type_name: str = args["type"]
        doc = args["doc"]
        if type_name == "AgentCard+0.3":
            problems = [p for p in [validate_merged_card(doc)] if p]
        elif type_name == "Any":
            problems = [p for p in [validate_any(doc)] if p]
        elif type_name.startswith(("JsonRpc:", "JsonRpcStream:")):
            kind, method = type_name.split(":", 1)
            problems = check_envelope(method, doc, streamed=kind == "JsonRpcStream")
        else:
            problems = [p for p in [validate(type_name, doc)] if p]
        return {"problems": problems}

    async def op_exchanges(self, args: dict[str, Any]) -> dict[str, Any]:
        """What crossed the wire for this session, raw (the test side reads ids, headers, bodies)."""
        return {"exchanges": [e.summary() for e in self.session(args).wire.exchanges]}


async def serve(driver: Driver, read: Callable[[], str], write: Callable[[str], None]) -> None:
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, read)
        if not line:
            return
        request = json.loads(line)
        answer: dict[str, Any] = {"id": request.get("id")}
        op = getattr(driver, f"op_{request['op']}", None)
        session = driver.sessions.get(request.get("args", {}).get("as", "main"))
        seen = len(session.wire.exchanges) if session is not None else 0
        try:
            if op is None:
                raise ValueError(f"no op {request['op']!r}")
            answer["result"] = await op(request.get("args", {}))
        except Exception as exc:  # the SDK's refusal is an answer the test asserts on
            answer["error"] = {
                "type": type(exc).__name__,
                "message": str(exc),
                "data": getattr(exc, "data", None),
                "trace": traceback.format_exc(limit=6),
            }
        session = driver.sessions.get(request.get("args", {}).get("as", "main"))
        if session is not None and request["op"] != "exchanges":
            fresh = session.wire.exchanges[seen:] if request["op"] != "connect" else session.wire.exchanges
            problems = [p for e in fresh for p in e.check()]
            answer["wire"] = {"checked": len(fresh), "problems": problems}
        write(json.dumps(answer) + "\n")


def main() -> None:
    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    driver = Driver()

    async def run() -> None:
        try:
            await serve(driver, sys.stdin.readline, write)
        finally:
            await driver.close()

    asyncio.run(run())


if __name__ == "__main__":
    main()
