"""The hand-off client: the engine's ``PeerPort`` over A2A, through the guarded egress client.

It reads the peer's agent card once per peer and process, picks the version
(``engine.handoff.negotiation``: ``auto`` takes 1.0 if the card offers a JSON-RPC 1.0
interface, else 0.3 if the operator's floor, ``--a2a-minimum-version``, allows it; or the
node's pinned one), and speaks JSON-RPC in it. Every request goes through the egress client the root built
(the guard's scheme and address arms, a pinned connection, no redirects). Failures are
sorted for the follower: a refused address, an auth refusal or a protocol error is final
(``PeerRefused``); a network error, a timeout, 408/429/5xx or an internal error is worth
another try (``PeerUnavailable``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Final

import httpx
import orjson

from tether import tracing
from tether.a2a.files import FileLimits
from tether.a2a.peer import _files, _wire
from tether.a2a.peer.tokens import push_path, push_token
from tether.egress import EgressResponseTooLarge
from tether.egress.guard import EgressRefused
from tether.engine.handoff.negotiation import Negotiation, decide, pinned_below_floor
from tether.engine.handoff.peer import PeerCall, PeerRef, PeerRefused, PeerTask, PeerUnavailable
from tether.engine.handoff.record import push_config_key
from tether.ids import new_id

__all__ = ["CredentialLookup", "PeerClient"]

CARD_PATH: Final = "/.well-known/agent-card.json"
#: a credential's ``Authorization`` value for (credential name, request URL); raises PeerRefused when the
#: credential is unknown or bound to another origin (``credentials.OutboundCredentials``)
CredentialLookup = Callable[[str, str], Awaitable[str]]
_TASK_NOT_FOUND: Final = -32001
_NOT_CANCELABLE: Final = -32002
_INTERNAL: Final = -32603
#: A2A 1.0's VersionNotSupportedError: the peer does not speak the version asked for
_VERSION_NOT_SUPPORTED: Final = -32009
#: a peer's file bytes are decoded and hashed off the event loop beyond this much base64
_OFF_LOOP: Final = 256 * 1024


@dataclass(frozen=True, slots=True)
class _Peer:
    """What a peer's card said: where its JSON-RPC endpoint is, per version, whether it pushes and streams."""

    endpoints: dict[str, str]
    pushes: bool
    streams: bool = False


def _major_minor(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    pieces = value.split(".")
    return ".".join(pieces[:2]) if len(pieces) >= 2 else None


def read_card(card: Any) -> _Peer:
    """The JSON-RPC endpoints a card offers: 1.0 ``supportedInterfaces``, else 0.3's ``url`` and interfaces."""
    if not isinstance(card, dict):
        raise PeerRefused("a2a_peer_invalid_card", "the peer's agent card is not an object")
    endpoints: dict[str, str] = {}
    for interface in card.get("supportedInterfaces") or []:
        if isinstance(interface, dict) and interface.get("protocolBinding") == "JSONRPC":
            version = _major_minor(interface.get("protocolVersion"))
            if version in ("1.0", "0.3") and isinstance(interface.get("url"), str):
                endpoints.setdefault(version, interface["url"])
    legacy = _major_minor(card.get("protocolVersion"))
    if "0.3" not in endpoints and (legacy == "0.3" or (legacy is None and not endpoints)):
        if card.get("preferredTransport", "JSONRPC") == "JSONRPC" and isinstance(card.get("url"), str):
            endpoints["0.3"] = card["url"]
        for interface in card.get("additionalInterfaces") or []:
            if isinstance(interface, dict) and interface.get("transport") == "JSONRPC":
                endpoints.setdefault("0.3", str(interface.get("url")))
    capabilities: dict[str, Any] = card["capabilities"] if isinstance(card.get("capabilities"), dict) else {}
    return _Peer(endpoints, bool(capabilities.get("pushNotifications")), bool(capabilities.get("streaming")))


@contextlib.contextmanager
def _translated(url: str, *, whole: bool = True) -> Iterator[None]:
    """The egress guard's refusal is final (``egress_denied``); any other transport error is worth another try.

    ``whole``: the response is one answer, so one longer than the egress client reads (the
    file limits' worth) is final too (``a2a_peer_file_too_large``): the peer's task will not
    shrink. A stream is not one answer: it is cut there and attached to again.
    """
    try:
        yield
    except EgressRefused as refused:
        raise PeerRefused("egress_denied", f"the egress guard refused {url}: {refused.message}") from refused
    except EgressResponseTooLarge as exc:
        if not whole:
            raise PeerUnavailable("external_call_failed", f"{url}: {exc}") from exc
        raise PeerRefused(
            _files.TOO_LARGE,
            f"{url}: the peer's answer is longer than this host reads ({exc}): its files are over this "
            "host's limits (--a2a-file-message-bytes, in base64, beside --max-body-bytes)",
        ) from exc
    except httpx.HTTPError as exc:
        raise PeerUnavailable("external_call_failed", f"{url}: {type(exc).__name__}: {exc}") from exc


class PeerClient:
    """Hand-offs' A2A client; one per host, built at the root around the egress client.

    ``limits``: the file limits what a peer answers is held to (the operator's, as for a
    message this host is sent); the client should read answers that long
    (``FileLimits.body_limit``), and a longer one fails the hand-off.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        host_key: bytes,
        public_url: str,
        limits: FileLimits,
        credentials: CredentialLookup | None = None,
        minimum_version: str = "1.0",
    ) -> None:
        self._client = client
        self._host_key = host_key
        self._public_url = public_url.rstrip("/")
        self._credentials = credentials
        self._limits = limits
        self._floor = minimum_version
        self._peers: dict[str, _Peer] = {}

    # the port ---------------------------------------------------------------------------------

    async def negotiate(self, call: PeerCall) -> Negotiation:
        if pinned_below_floor(call.version, self._floor):  # nothing to ask the peer
            return decide(call.agent, call.version, (), self._floor)
        peer = await self._peer(call.agent, call.credential)
        return decide(call.agent, call.version, tuple(peer.endpoints), self._floor)

    async def send(self, call: PeerCall, *, message_id: str, metadata: dict[str, Any]) -> tuple[PeerRef, PeerTask]:
        decision = await self.negotiate(call)
        if decision.version is None:
            raise PeerRefused("interop_version_unsupported", decision.message)
        version = decision.version
        peer = await self._peer(call.agent, call.credential)
        meta: dict[str, Any] = dict(metadata)
        if call.skill:
            meta["skillId"] = call.skill
        files = [_files.outbound(file) for file in call.files]
        doc = _wire.message(message_id, text=call.text, data=call.data, metadata=meta, files=files)
        ref = PeerRef(call.agent, peer.endpoints[version], version, "", None, call.credential, call.trace)
        result = await self._call(ref, "send", self._send_params(doc, version), idempotency_key=message_id)
        try:
            task = _wire.task_of(result, version)
        except ValueError as exc:
            raise PeerRefused("a2a_peer_invalid_response", str(exc)) from exc
        return replace(ref, task_id=task.task_id, context_id=task.context_id), await self._kept(task)

    async def probe(self, agent: str, asked: str) -> str:
        """Send the peer one message asking for A2A version ``asked`` on the interface negotiated as any
        hand-off's is, and return the version its answer was read in (the invoke seam's ``requestVersion``).

        Raises ``PeerRefused`` as a send does: ``interop_version_unsupported`` when the floor
        refuses the peer or the peer refuses ``asked`` (``-32009``, its details either shape).
        """
        decision = await self.negotiate(PeerCall(agent))
        if decision.version is None:
            raise PeerRefused("interop_version_unsupported", decision.message)
        peer = await self._peer(agent, None)
        ref = PeerRef(agent, peer.endpoints[decision.version], decision.version, "")
        doc = _wire.message(new_id("msg_"), text="a version probe", metadata={})
        await self._call(ref, "send", self._send_params(doc, decision.version), wire_version=asked)
        return asked

    async def get(self, ref: PeerRef) -> PeerTask:
        result = await self._call(ref, "get", {"id": ref.task_id, "historyLength": 0})
        try:
            task = _wire.task_of(result, ref.version)
        except ValueError as exc:
            raise PeerUnavailable("a2a_peer_invalid_response", str(exc)) from exc
        return await self._kept(task)

    async def _kept(self, task: PeerTask) -> PeerTask:
        """The task with its files as the run keeps them (decoded and hashed off the event loop when large)."""
        if _files.inline_chars(task) <= _OFF_LOOP:
            return _files.kept(task, self._limits)
        return await asyncio.to_thread(_files.kept, task, self._limits)

    async def reply(self, ref: PeerRef, *, message_id: str, value: dict[str, Any], metadata: dict[str, Any]) -> None:
        doc = _wire.message(message_id, data=value, task_id=ref.task_id, context_id=ref.context_id, metadata=metadata)
        await self._call(ref, "send", self._send_params(doc, ref.version), idempotency_key=message_id)

    async def cancel(self, ref: PeerRef) -> None:
        params = {"id": ref.task_id, "metadata": {"reason": "cross_protocol_cancel"}}
        try:
            await self._call(ref, "cancel", params)
        except PeerRefused as refused:
            if refused.code != "a2a_peer_not_cancelable":
                raise

    async def pushes(self, ref: PeerRef) -> bool:
        return (await self._peer(ref.agent, ref.credential)).pushes

    async def subscribe(self, ref: PeerRef, handoff_id: str) -> bool:
        if not await self.pushes(ref):
            return False
        config = {
            "id": handoff_id,
            "url": self._public_url + push_path(handoff_id),
            "token": push_token(self._host_key, handoff_id),
        }
        if ref.version == "0.3":
            params: dict[str, Any] = {"taskId": ref.task_id, "pushNotificationConfig": config}
        else:
            params = {"taskId": ref.task_id, **config}
        await self._call(ref, "push", params, idempotency_key=push_config_key(handoff_id))
        return True

    async def watch(self, ref: PeerRef) -> AsyncGenerator[str, None]:
        peer = await self._peer(ref.agent, ref.credential)
        if not peer.streams:
            raise PeerRefused("a2a_peer_cannot_stream", f"the peer at {ref.agent} does not stream (its card says so)")
        method = _wire.METHODS[ref.version]["subscribe"]
        headers = await self._headers(ref, accept="text/event-stream")
        body = orjson.dumps({"jsonrpc": "2.0", "id": new_id("rpc_"), "method": method, "params": {"id": ref.task_id}})
        with _translated(ref.rpc_url, whole=False):
            async with self._client.stream("POST", ref.rpc_url, headers=headers, content=body) as response:
                if response.status_code != 200:
                    raise self._http_error(response, ref.rpc_url)
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    raise PeerRefused("a2a_peer_cannot_stream", f"{method}: the peer answered no event stream")
                data: list[str] = []
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif not line and data:
                        yield "\n".join(data)
                        data = []

    # the wire -----------------------------------------------------------------------------------

    @staticmethod
    def _send_params(doc: dict[str, Any], version: str) -> dict[str, Any]:
        """Never block: the follower waits, not a request."""
        configuration = {"blocking": False} if version == "0.3" else {"returnImmediately": True}
        return {"message": _wire.render_message(doc, version), "configuration": configuration}

    async def _peer(self, agent: str, credential: str | None) -> _Peer:
        known = self._peers.get(agent)
        if known is not None:
            return known
        url = agent if agent.endswith(".json") else agent.rstrip("/") + CARD_PATH
        headers = {"A2A-Version": "1.0", "Accept": "application/json"}
        await self._authorize(headers, url, credential)
        response = await self._request("GET", url, headers)
        if response.status_code != 200:
            raise self._http_error(response, url)
        try:
            peer = read_card(orjson.loads(response.content))
        except orjson.JSONDecodeError as exc:
            raise PeerRefused("a2a_peer_invalid_card", f"the agent card at {url} is not JSON") from exc
        self._peers[agent] = peer
        return peer

    async def _authorize(self, headers: dict[str, str], url: str, credential: str | None) -> None:
        """Add the named credential, opened for this URL's origin only (the lookup refuses any other)."""
        if credential is None:
            return
        if self._credentials is None:
            raise PeerRefused("credential_not_found", f"this host keeps no outbound credentials ({credential!r})")
        headers["Authorization"] = await self._credentials(credential, url)

    async def _request(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None = None
    ) -> httpx.Response:
        with _translated(url):
            return await self._client.request(method, url, headers=headers, content=body)

    @staticmethod
    def _http_error(response: httpx.Response, url: str) -> PeerRefused | PeerUnavailable:
        status = response.status_code
        if status in (408, 429) or status >= 500:
            return PeerUnavailable("external_call_failed", f"{url}: HTTP {status}")
        if status in (401, 403):
            return PeerRefused("a2a_peer_unauthorized", f"{url}: HTTP {status}: the peer refused our credentials")
        if 300 <= status < 400:
            return PeerRefused("a2a_peer_redirected", f"{url}: HTTP {status}: redirects are never followed")
        return PeerRefused("a2a_peer_error", f"{url}: HTTP {status}")

    async def _headers(
        self, ref: PeerRef, accept: str = "application/json", wire_version: str | None = None
    ) -> dict[str, str]:
        """A JSON-RPC request's headers: its version, its trace, and the hand-off's credential (if any)."""
        version = wire_version or ref.version
        headers = {"A2A-Version": version, "Content-Type": "application/json", "Accept": accept}
        if ref.trace is not None:  # each request a span of its own in the run's trace
            headers["traceparent"] = tracing.outbound(ref.trace, f"A2A {ref.version} {ref.rpc_url}")
        await self._authorize(headers, ref.rpc_url, ref.credential)
        return headers

    async def _call(
        self,
        ref: PeerRef,
        action: str,
        params: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        wire_version: str | None = None,
    ) -> Any:
        """One JSON-RPC call; ``idempotency_key``: an effect's key, sent as ``Idempotency-Key`` (the same on
        every attempt of the effect, so a peer that keeps such keys sees one request however many arrive);
        ``wire_version``: the ``A2A-Version`` to ask for instead of the call's own (a probe's)."""
        method = _wire.METHODS[ref.version][action]
        headers = await self._headers(ref, wire_version=wire_version)
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        body = orjson.dumps({"jsonrpc": "2.0", "id": new_id("rpc_"), "method": method, "params": params})
        response = await self._request("POST", ref.rpc_url, headers, body)
        try:
            answer = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            answer = None
        # a refusal at the HTTP layer (a key missing or refused) comes in whatever envelope the peer's
        # framework uses (Tether's is its REST one: {"error": "unauthenticated", ...}), not JSON-RPC's
        is_rpc = isinstance(answer, dict) and ("result" in answer or isinstance(answer.get("error"), dict))
        if not is_rpc or response.status_code in (401, 403):
            raise (
                self._http_error(response, ref.rpc_url)
                if response.status_code != 200
                else PeerRefused("a2a_peer_invalid_response", f"{ref.rpc_url}: {method} answered no JSON-RPC response")
            )
        assert isinstance(answer, dict)
        error = answer.get("error")
        if isinstance(error, dict):
            code, message = error.get("code"), str(error.get("message", ""))[:500]
            if code == _INTERNAL or response.status_code >= 500:
                raise PeerUnavailable("external_call_failed", f"{method}: {message}")
            if code == _TASK_NOT_FOUND:
                raise PeerRefused("a2a_peer_task_not_found", f"{method}: the peer has no task {ref.task_id}: {message}")
            if code == _VERSION_NOT_SUPPORTED:
                asked = headers["A2A-Version"]
                raise PeerRefused(
                    "interop_version_unsupported", f"{method}: the peer does not speak A2A {asked}: {message}"
                )
            if code == _NOT_CANCELABLE:
                raise PeerRefused("a2a_peer_not_cancelable", f"{method}: {message}")
            raise PeerRefused("a2a_peer_error", f"{method} failed ({code}): {message}")
        return answer["result"]
