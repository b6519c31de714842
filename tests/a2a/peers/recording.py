"""What a scripted peer was sent: an ASGI wrapper the peers in this folder share (``--record FILE``).

Standard library only, so it runs in any peer's environment (the main one, or a sidecar's).
"""

from __future__ import annotations

import json
from typing import Any


def recording(app: Any, path: str) -> Any:
    """Wrap ``app``: every POST's ``traceparent`` and body are appended to ``path`` before the app sees them."""

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        trace = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"traceparent"), None)
        with open(path, "a") as out:
            out.write(json.dumps({"traceparent": trace, "body": json.loads(body or b"null")}) + "\n")
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return recorded
