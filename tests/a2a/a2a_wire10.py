"""Raw A2A 1.0 JSON-RPC and SSE against a real host, every answer checked by the outside oracle.

The 1.0 twin of ``a2a_wire``: tests speak the 1.0 wire with httpx (``A2A-Version: 1.0``,
PascalCase methods, ProtoJSON), and every answer and stream event passes a2a-sdk 1.3.0's
strict protobuf models (``proto_oracle``), so no 1.0 test can forget to check its shapes.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from a2a_wire import RPC
from proto_oracle import validate_v10

#: JSON-RPC request ids, unique in the session
ids = itertools.count(1)


def user10(text: str, *, skill: str | None = None) -> dict[str, Any]:
    """A 1.0 ROLE_USER message (ProtoJSON: member-discriminated parts, no ``kind``)."""
    doc: dict[str, Any] = {"messageId": f"v10-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": text}]}
    if skill is not None:
        doc["metadata"] = {"skillId": skill}
    return doc


def post10(
    http: httpx.Client,
    method: str,
    params: Any,
    *,
    version: str | None = "1.0",
    query: str | None = None,
    request_id: int | None = None,
) -> httpx.Response:
    """One JSON-RPC call with ``A2A-Version: version`` (None: no header; ``query``: as a query parameter)."""
    headers = {"A2A-Version": version} if version is not None else {}
    url = RPC if query is None else f"{RPC}?A2A-Version={query}"
    body = {"jsonrpc": "2.0", "id": request_id if request_id is not None else next(ids), "method": method}
    if params is not None:
        body["params"] = params
    response = http.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response


def answer10(response: httpx.Response, method: str, version: str = "1.0") -> dict[str, Any]:
    """A 1.0 (or 1.1) answer, checked whole by the oracle (envelope, result type or error details)."""
    assert response.headers["A2A-Version"] == version, "the answer names the version that answered"
    body: dict[str, Any] = response.json()
    validate_v10(f"JsonRpc:{method}", without_generations(body))
    return body


def result10(http: httpx.Client, method: str, params: Any, **kwargs: Any) -> Any:
    """The checked result of one call (``version=`` and ``query=`` as :func:`post10` takes them)."""
    asked = kwargs.get("version") or "1.0"
    body = answer10(post10(http, method, params, **kwargs), method, ".".join(asked.split(".")[:2]))
    assert "error" not in body, body
    return body["result"]


@dataclass(frozen=True)
class Frame10:
    """One SSE event of a 1.0 stream: its ``id:`` (None when absent) and its StreamResponse."""

    id: int | None
    result: dict[str, Any]

    @property
    def member(self) -> str:
        """``task``, ``statusUpdate``, ``artifactUpdate`` or ``message``: the StreamResponse's one member."""
        (name,) = self.result
        return name

    @property
    def state(self) -> str | None:
        body = self.result[self.member]
        return body["status"]["state"] if self.member in ("task", "statusUpdate") else None

    @property
    def progress(self) -> dict[str, Any] | None:
        """A multi-step task's progress report, else None."""
        if self.member != "statusUpdate":
            return None
        found: dict[str, Any] | None = (
            self.result["statusUpdate"].get("metadata", {}).get("openwop", {}).get("progress")
        )
        return found


def iter_stream10(
    http: httpx.Client, method: str, params: Any, *, headers: dict[str, str] | None = None
) -> Iterator[Frame10]:
    """The frames of a 1.0 stream as they arrive, each checked by the oracle; leaving the loop drops it.

    The oracle knows 1.0 only: a 1.1 frame is checked with its draft ``generation`` set aside.
    """
    body = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
    with http.stream("POST", RPC, json=body, headers={"A2A-Version": "1.0", **(headers or {})}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream"), response.read()
        sse_id: int | None = None
        data: list[str] = []
        for line in response.iter_lines():
            if line == "":
                if data:
                    event = json.loads("\n".join(data))
                    validate_v10(f"JsonRpcStream:{method}", without_generations(event))
                    assert "result" in event, event
                    yield Frame10(sse_id, event["result"])
                sse_id, data = None, []
            elif line.startswith("id:"):
                sse_id = int(line[3:].strip())
            elif line.startswith("data:"):
                data.append(line[5:].strip())


def stream10(
    http: httpx.Client,
    method: str,
    params: Any,
    *,
    headers: dict[str, str] | None = None,
    until: Callable[[list[Frame10]], bool] | None = None,
) -> list[Frame10]:
    """Every frame of a 1.0 stream until the host closes it, or until ``until`` holds."""
    frames: list[Frame10] = []
    for frame in iter_stream10(http, method, params, headers=headers):
        frames.append(frame)
        if until is not None and until(frames):
            break
    return frames


def without_generations(doc: Any) -> Any:
    """``doc`` with every draft ``generation`` field left out (what a 1.0 validator may check)."""
    if isinstance(doc, dict):
        return {k: without_generations(v) for k, v in doc.items() if k != "generation"}
    if isinstance(doc, list):
        return [without_generations(v) for v in doc]
    return doc


def frames10(frames: list[Frame10]) -> Iterator[tuple[str, str | None]]:
    """(member, state) of each frame."""
    return ((f.member, f.state) for f in frames)
