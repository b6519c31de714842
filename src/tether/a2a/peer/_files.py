"""Files across a hand-off: sent with their bytes in the peer's version.

Out: a file the node was given goes as the canonical (0.3) part with its bytes inline
(``file.bytes``, base64), which the 1.0 codec renders as ``raw``, ``filename`` and
``mediaType``; a file by URI goes as that URI.
"""

from __future__ import annotations

import base64
from typing import Any

from tether.engine.peer import PeerFile

__all__ = ["outbound"]


def outbound(file: PeerFile) -> dict[str, Any]:
    """The canonical part that sends ``file``: its bytes inline (the follower read them), or its URI."""
    if file.data is not None:
        body: dict[str, Any] = {"bytes": base64.b64encode(file.data).decode("ascii")}
    elif file.uri is not None:
        body = {"uri": file.uri}
    else:  # the follower reads every blob's bytes before the send
        raise ValueError(f"file {file.blob} was not read before the send")
    if file.name:
        body["name"] = file.name
    if file.media_type:
        body["mimeType"] = file.media_type
    return {"kind": "file", "file": body}
