"""Files across a hand-off: sent with their bytes in the peer's version, taken back as blobs within limits.

Out: a file the node was given goes as the canonical (0.3) part with its bytes inline
(``file.bytes``, base64), which the 1.0 codec renders as ``raw``, ``filename`` and
``mediaType``; a file by URI goes as that URI.

Back: whatever the peer answers is untrusted. A file part of its artifacts or of its
status message keeps only its bytes or its URI, its name and media type (a ``blob`` the
peer names is not the peer's to name, so it is dropped with the part); its bytes are
decoded, held to this host's file limits (one part, and all of one answer's files
together, as for an A2A message this host is sent) and made a blob, so that the event
that records the answer holds only the reference. Over a limit the hand-off fails with
the limit named, and nothing is stored. A URI stays a URI: it is never fetched.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any, Final

from tether.a2a.files import FileLimits
from tether.engine.handoff.peer import PeerFile, PeerRefused, PeerTask
from tether.files import Blob, decode_base64, file_part, stored_part

__all__ = ["inline_chars", "kept", "outbound"]

TOO_LARGE: Final = "a2a_peer_file_too_large"


def outbound(file: PeerFile) -> dict[str, Any]:
    """The canonical part that sends ``file``: its bytes inline (the follower read them), or its URI."""
    if file.data is not None:
        body: dict[str, Any] = {"bytes": base64.b64encode(file.data).decode("ascii")}
    elif file.uri is not None:
        body = {"uri": file.uri}
    else:  # the follower reads every blob's bytes before the send
        raise ValueError(f"file {file.blob} was not read before the send")
    return file_part(body, file.name, file.media_type)


def _files_of(part: Any) -> dict[str, Any] | None:
    """The ``file`` object of a file part (None for any other part)."""
    if not isinstance(part, dict) or part.get("kind") != "file":
        return None
    file = part.get("file")
    return file if isinstance(file, dict) else None


def inline_chars(task: PeerTask) -> int:
    """How much base64 the peer's answer carries in its file parts (worth decoding off the event loop)."""
    holders = [*(a.get("parts") for a in task.artifacts), task.files]
    return sum(
        len(file["bytes"])
        for parts in holders
        if isinstance(parts, list)
        for part in parts
        if (file := _files_of(part)) is not None and isinstance(file.get("bytes"), str)
    )


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


class _Taker:
    """Takes one answer's file parts: each checked against the limits, its bytes made a blob."""

    def __init__(self, limits: FileLimits) -> None:
        self.limits = limits
        self.total = 0
        self.blobs: dict[str, Blob] = {}

    def _over(self, where: str, size: int, limit: int, what: str, flag: str) -> PeerRefused:
        return PeerRefused(
            TOO_LARGE,
            f"the peer's answer: {where} is {size} bytes ({_mib(size)}), over the limit of {limit} bytes "
            f"({_mib(limit)}) {what} on this host (--{flag}); nothing of it is kept",
        )

    def part(self, part: Any, where: str) -> dict[str, Any] | None:
        """``part`` as this run keeps it: a file by reference or URI (None: a file part that is neither)."""
        file = _files_of(part)
        if file is None:
            return part if isinstance(part, dict) else None
        name, mime = file.get("name"), file.get("mimeType")
        name = name if isinstance(name, str) and name else None
        mime = mime if isinstance(mime, str) and mime else None
        metadata = part.get("metadata") if isinstance(part.get("metadata"), dict) else None
        text = file.get("bytes")
        if isinstance(text, str):
            return stored_part(self._blob(text, where), name, mime, metadata)
        uri = file.get("uri")
        if not isinstance(uri, str) or not uri:
            return None
        return file_part({"uri": uri}, name, mime, metadata)

    def _blob(self, text: str, where: str) -> Blob:
        limits = self.limits
        size = len(text) // 4 * 3 - text.count("=", max(0, len(text) - 2))  # what it decodes to, if it is base64
        if size > limits.part:  # plainly over the limit: not worth decoding
            raise self._over(where, size, limits.part, "a file part may carry", "a2a-file-part-bytes")
        try:
            data = decode_base64(text)
        except ValueError as exc:
            raise PeerRefused("a2a_peer_invalid_response", f"the peer's answer: {where} is {exc}") from None
        if len(data) > limits.part:
            raise self._over(where, len(data), limits.part, "a file part may carry", "a2a-file-part-bytes")
        self.total += len(data)
        if self.total > limits.message:
            what, flag = "one answer's files may carry", "a2a-file-message-bytes"
            raise self._over("its files together", self.total, limits.message, what, flag)
        blob = Blob.of(data)
        self.blobs.setdefault(blob.digest, blob)
        return blob

    def parts(self, parts: Any, where: str) -> list[dict[str, Any]]:
        if not isinstance(parts, list):
            return []
        kept = (self.part(part, f"{where}.{index}") for index, part in enumerate(parts))
        return [part for part in kept if part is not None]


def kept(task: PeerTask, limits: FileLimits) -> PeerTask:
    """``task`` with its file parts as this run keeps them: bytes made blobs (``blobs``), within ``limits``.

    Raises
    ------
    PeerRefused
        ``a2a_peer_file_too_large`` (the limit named) or ``a2a_peer_invalid_response`` (bytes
        that are not base64): final, as the peer's answer will not change.
    """
    taker = _Taker(limits)
    artifacts = [
        {**artifact, "parts": taker.parts(artifact.get("parts"), f"artifacts.{index}.parts")}
        for index, artifact in enumerate(task.artifacts)
    ]
    files = [part for part in taker.parts(task.files, "status.message.parts") if _files_of(part) is not None]
    return replace(task, artifacts=artifacts, files=files, blobs=list(taker.blobs.values()))
