"""File parts inside Tether: the one shape a file is kept in, and the blob that holds its bytes.

A file reaches Tether as an A2A part (0.3 ``{kind: "file", file: {bytes|uri, name?, mimeType?}}``,
1.0 ``{raw|url, filename?, mediaType?}``) or is made by a node. Inside, whatever brought it,
it is a canonical part of the one shape the rest of the A2A objects are kept in (the 0.3 one)::

    {"kind": "file", "file": {"blob": "sha256:<64 hex>", "size": 1048576, "name"?: …, "mimeType"?: …}}
    {"kind": "file", "file": {"uri": "https://…", "name"?: …, "mimeType"?: …}}

Inline bytes live in a content-addressed :class:`Blob`, stored once per content and linked to
each run that refers to it, committed with the event that first refers to it (``Commit.blobs``).
Events, run state, task records and task history hold only the reference, so the event log's
rows stay small and a task read pays for bytes only when it renders them. A URI is kept as the
reference it is: Tether never fetches it.

Nothing here imports the rest of Tether: the store, the engine and the A2A codecs share it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DIGEST",
    "Blob",
    "decode_base64",
    "digest_of",
    "file_part",
    "file_parts",
    "stored_inline",
    "stored_part",
]

#: a blob reference: the sha256 of its bytes, in lowercase hex, after the algorithm's name
DIGEST = re.compile("sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Blob:
    """Bytes a file part refers to, named by their sha256 (``digest``): the same bytes, the same blob."""

    digest: str
    data: bytes

    @classmethod
    def of(cls, data: bytes) -> Blob:
        return cls("sha256:" + hashlib.sha256(data).hexdigest(), data)

    @property
    def size(self) -> int:
        return len(self.data)


def decode_base64(text: str) -> bytes:
    """Standard base64 (with padding, as both A2A versions write bytes), strictly: ValueError otherwise."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not standard base64: {exc}") from None


def stored_part(
    blob: Blob, name: str | None = None, mime_type: str | None = None, metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The canonical part of a file whose bytes are ``blob``."""
    return file_part({"blob": blob.digest, "size": blob.size}, name, mime_type, metadata)


def file_part(
    file: dict[str, Any],
    name: str | None = None,
    mime_type: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A file part of the canonical shape around ``file`` (its ``blob``, ``uri`` or ``bytes``), named and typed."""
    if name:
        file["name"] = name
    if mime_type:
        file["mimeType"] = mime_type
    part: dict[str, Any] = {"kind": "file", "file": file}
    if metadata:
        part["metadata"] = dict(metadata)
    return part


def digest_of(part: Any) -> str | None:
    """The blob a canonical part refers to (None for any other part, a URI among them)."""
    if not isinstance(part, dict) or part.get("kind") != "file":
        return None
    file = part.get("file")
    digest = file.get("blob") if isinstance(file, dict) else None
    return digest if isinstance(digest, str) else None


def file_parts(value: Any) -> Iterator[dict[str, Any]]:
    """Every file part (``kind: "file"`` with a ``file`` object) anywhere in a JSON value."""
    if isinstance(value, dict):
        if value.get("kind") == "file" and isinstance(value.get("file"), dict):
            yield value
            return
        for item in value.values():
            yield from file_parts(item)
    elif isinstance(value, list):
        for item in value:
            yield from file_parts(item)


def stored_inline(value: Any) -> tuple[Any, list[Blob]]:
    """``value`` with every file part that carries its bytes inline (``file.bytes``, base64) made a
    reference to a blob, and those blobs: what a node's outputs become before they are an event.

    A value with no such part is returned as it is (the same object); one with some, as a
    copy. ValueError names the first part whose bytes are not base64.
    """
    if not any(isinstance(part["file"].get("bytes"), str) for part in file_parts(value)):
        return value, []  # the usual case, found without copying anything
    blobs: list[Blob] = []

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            file = item.get("file")
            if item.get("kind") == "file" and isinstance(file, dict):
                raw = file.get("bytes")
                if not isinstance(raw, str):
                    return item
                blob = Blob.of(decode_base64(raw))
                blobs.append(blob)
                name, mime = file.get("name"), file.get("mimeType")
                return stored_part(
                    blob,
                    name if isinstance(name, str) else None,
                    mime if isinstance(mime, str) else None,
                    item.get("metadata") if isinstance(item.get("metadata"), dict) else None,
                )
            return {key: walk(sub) for key, sub in item.items()}
        if isinstance(item, list):
            return [walk(sub) for sub in item]
        return item

    return walk(value), blobs
