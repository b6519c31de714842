"""File parts at the A2A edge: bytes in, bounded and stored; references out, bytes put back.

A message's inline file bytes (0.3 ``file.bytes``, 1.0 ``raw``, base64 on the wire either
way) are decoded, held to the operator's limits and made blobs by :func:`stored_message`,
before anything is written: a file over a limit is refused (-32602, HTTP 413, naming the
limit) and nothing is stored. What the task keeps (history, run inputs, outputs,
artifacts) holds the canonical reference of :mod:`tether.files` instead.

Every rendering of a task or an update goes through :meth:`FileBytes.inline`, which puts
the bytes back as the 0.3 wire writes them (``file.bytes``), the shape both codecs render
from. A document without a stored file part is returned as it is, at the cost of looking
at its parts.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tether.a2a.errors import FileTooLarge, InvalidParams
from tether.a2a.message import FilePart, Message
from tether.caches import holds_copies
from tether.files import Blob, decode_base64, digest_of, stored_part
from tether.settings import Settings
from tether.store.base import Store

__all__ = ["FileBytes", "FileLimits", "Stored", "has_files", "stored_message"]

log = logging.getLogger("tether.a2a")

#: decoded and hashed off the event loop beyond this much base64 (a 16 MiB message takes ~40 ms)
_OFF_LOOP = 256 * 1024
#: what the bytes cache holds at most, in base64 characters
CACHE_BUDGET = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileLimits:
    """How much file content an A2A message may carry inline: per part and in all (decoded bytes)."""

    part: int
    message: int

    @classmethod
    def of(cls, settings: Settings) -> FileLimits:
        return cls(settings.a2a_file_part_bytes, settings.a2a_file_message_bytes)

    def body_limit(self, base: int) -> int:
        """The A2A request body limit that admits a message at these limits: ``base`` for the
        rest of the request, plus the message's file bytes as base64 (4 characters per 3 bytes)."""
        return base + 4 * -(-self.message // 3)


@dataclass(frozen=True, slots=True)
class Stored:
    """A message as a task keeps it (file bytes made references) and the blobs those refer to."""

    doc: dict[str, Any]
    blobs: list[Blob]


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def _too_large(where: str, size: int, limit: int, what: str, flag: str) -> FileTooLarge:
    return FileTooLarge(
        f"{where}: {size} bytes ({_mib(size)}) is over the limit of {limit} bytes ({_mib(limit)}) {what} "
        f"(--{flag}): send a larger file as a URI",
        data={"limit": flag, "limitBytes": limit, "sizeBytes": size, "path": where},
    )


def _decoded(message: Message, limits: FileLimits, member: str) -> list[tuple[int, Blob]]:
    """Each inline file part's blob, by part index; FileTooLarge or InvalidParams before any is kept.

    ``member``: where the bytes are in the caller's part (``file.bytes`` in 0.3, ``raw`` in 1.0).
    """
    found: list[tuple[int, Blob]] = []
    total = 0
    for index, part in enumerate(message.parts):
        if not isinstance(part, FilePart) or part.file.bytes is None:
            continue
        where = f"params.message.parts.{index}"
        text = part.file.bytes
        size = len(text) // 4 * 3 - text.count("=", max(0, len(text) - 2))  # what it decodes to, if it is base64
        if size > limits.part:  # plainly over the limit: not worth decoding
            raise _too_large(where, size, limits.part, "a file part may carry", "a2a-file-part-bytes")
        try:
            data = decode_base64(text)
        except ValueError as exc:
            raise InvalidParams(
                f"{where}.{member} is {exc} (the file's bytes go as standard base64, with padding)",
                data={"errors": [{"path": f"{where}.{member}", "message": "not standard base64"}]},
            ) from None
        if len(data) > limits.part:
            raise _too_large(where, len(data), limits.part, "a file part may carry", "a2a-file-part-bytes")
        total += len(data)
        if total > limits.message:
            raise _too_large(
                "params.message", total, limits.message, "a message's files may carry", "a2a-file-message-bytes"
            )
        found.append((index, Blob.of(data)))
    return found


async def stored_message(message: Message, limits: FileLimits, version: str = "0.3") -> Stored:
    """The message as its task keeps it: each inline file a blob reference, checked against ``limits``.

    ``version``: the A2A version the message came in, whose names a refusal uses.

    Raises
    ------
    FileTooLarge
        A part, or the message's files together, over a limit (the limit is named).
    InvalidParams
        A part's bytes are not base64.
    """
    doc = message.model_dump(exclude_none=True)
    inline = sum(len(p.file.bytes) for p in message.parts if isinstance(p, FilePart) and p.file.bytes is not None)
    if not inline:
        return Stored(doc, [])
    member = "file.bytes" if version == "0.3" else "raw"
    if inline <= _OFF_LOOP:
        found = _decoded(message, limits, member)
    else:
        found = await asyncio.to_thread(_decoded, message, limits, member)
    for index, blob in found:
        part = message.parts[index]
        assert isinstance(part, FilePart)
        doc["parts"][index] = stored_part(blob, part.file.name, part.file.mimeType, part.metadata)
    return Stored(doc, [blob for _, blob in found])


def _holders(doc: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The objects of a canonical Task, message or update that hold parts (messages and artifacts)."""
    if isinstance(doc.get("parts"), list):
        yield doc
    status = doc.get("status")
    if isinstance(status, Mapping) and isinstance(status.get("message"), Mapping):
        yield status["message"]
    for key in ("history", "artifacts"):
        for holder in doc.get(key) or ():
            if isinstance(holder, Mapping):
                yield holder
    if isinstance(doc.get("artifact"), Mapping):
        yield doc["artifact"]


def _digests(doc: Mapping[str, Any]) -> list[str]:
    return [d for holder in _holders(doc) for part in holder.get("parts") or () if (d := digest_of(part)) is not None]


def has_files(doc: Mapping[str, Any]) -> bool:
    """Whether a canonical Task or update holds a stored file part (whose bytes rendering puts back)."""
    return bool(_digests(doc))


@holds_copies("_kept")
class FileBytes:
    """The bytes of the file parts of a run's tasks and updates, as the wire carries them (base64).

    This is a cache: a bounded per-host LRU of base64 text keyed by (run id, digest), at most
    :data:`CACHE_BUDGET` characters. A blob is immutable by its digest, so what it keeps can
    never be stale; it is keyed by run too, because a run reads only the blobs linked to it
    (``Store.read_blobs``) and a hit must not skip that check. A purged run's entries are
    never asked for again (its task is gone) and age out.
    """

    def __init__(self, store: Store, budget: int = CACHE_BUDGET) -> None:
        self.store = store
        self.budget = budget
        self._kept: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._size = 0

    async def inline(self, run_id: str, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` (a canonical Task, message or update of run ``run_id``) with its stored file parts'
        bytes put back as ``file.bytes``; ``doc`` itself when it has none (it is never changed).

        A part whose blob the run does not hold (a reference that reached the run's data some
        other way) is left out, and logged.
        """
        digests = _digests(doc)
        if not digests:
            return doc
        encoded = await self._encoded(run_id, set(digests))
        out = copy.deepcopy(doc)
        for holder in _holders(out):
            parts = holder["parts"]
            kept: list[Any] = []
            for part in parts:
                digest = digest_of(part)
                if digest is None:
                    kept.append(part)
                elif digest in encoded:
                    file = {k: v for k, v in part["file"].items() if k in ("name", "mimeType")}
                    part["file"] = {"bytes": encoded[digest], **file}
                    kept.append(part)
                else:
                    log.warning(
                        "run %s refers to file %s, which it does not hold: the part is left out", run_id, digest
                    )
            parts[:] = kept
        return out

    async def _encoded(self, run_id: str, digests: set[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        missing: list[str] = []
        for digest in digests:
            text = self._kept.get((run_id, digest))
            if text is None:
                missing.append(digest)
            else:
                self._kept.move_to_end((run_id, digest))
                found[digest] = text
        if missing:
            for digest, data in (await self.store.read_blobs(run_id, missing)).items():
                found[digest] = text = base64.b64encode(data).decode("ascii")
                self._keep((run_id, digest), text)
        return found

    def _keep(self, key: tuple[str, str], text: str) -> None:
        if len(text) > self.budget or key in self._kept:
            return
        self._kept[key] = text
        self._size += len(text)
        while self._size > self.budget:
            _, dropped = self._kept.popitem(last=False)
            self._size -= len(dropped)
