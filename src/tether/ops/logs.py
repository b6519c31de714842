"""The host's log: one line per record, as text for a terminal or JSON for a collector.

``--log-level`` picks the threshold and ``--log-format`` the shape. uvicorn's loggers
propagate to the same root handler, so every line of the process has one format. A
record's structured fields (``extra={"fields": {...}}``) become JSON members, or
``key=value`` pairs after the message in text. The host's own lines (serving, stopped, the
first key, a failed start: ``HostLines``) follow ``--log-format`` too, whatever the level.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import re
import sys
import time
from typing import Any, Final, NamedTuple, TextIO

import orjson

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "HostLines",
    "InfoLines",
    "JsonFormatter",
    "Shape",
    "TextFormatter",
    "configure",
    "fields_of",
]

LOG_LEVELS: Final = ("debug", "info", "warning", "error")
LOG_FORMATS: Final = ("text", "json")
#: the longest a hot-path INFO line waits to be written with the lines made after it
FLUSH_AFTER: Final = 0.05


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a record carries (``extra={"fields": {...}}``), or none."""
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


def utc_stamp(created: float) -> str:
    """A record's time as JSON lines write it: UTC, milliseconds, ``Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...`` for people."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = fields_of(record)
        if fields:
            line += " " + " ".join(f"{key}={_text(value)}" for key, value in fields.items())
        return line


#: a value written bare in text lines; anything else is quoted (as JSON) so the line still splits on spaces
_BARE = re.compile(r'[^\s"=]+')


def _text(value: object) -> str:
    text = "-" if value is None else str(value)
    return text if _BARE.fullmatch(text) else orjson.dumps(text).decode()


class JsonFormatter(logging.Formatter):
    """One JSON object per line for machines: time (UTC), level, logger, message and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": utc_stamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(fields_of(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class HostLines:
    """The host's own lines, written whatever ``--log-level`` says: it is serving, it stopped, its first key, why it
    could not start.

    In text they read ``tether: ...`` as they always have (people and scripts wait for
    ``serving on URL``). With ``--log-format json`` each is one JSON object, like every
    other line of the process, so a collector never meets a line it cannot parse: the
    logger ``tether.host``, the sentence as ``message``, ``event`` naming the line, and its
    facts (the URL, the count of resumed runs ...) as members of their own.
    """

    def __init__(self, fmt: str) -> None:
        self.json = fmt == "json"

    def say(
        self,
        event: str,
        message: str,
        *,
        text: str | None = None,
        level: str = "info",
        stream: TextIO | None = None,
        **facts: Any,
    ) -> None:
        """Write ``message`` (or, in text, ``text`` when it says more, e.g. a second line) to ``stream`` (stdout)."""
        if self.json:
            fields = {"time": utc_stamp(time.time()), "level": level, "logger": "tether.host", "message": message}
            line = orjson.dumps({**fields, "event": event, **facts}, default=str).decode()
        else:
            line = f"tether: {message if text is None else text}"
        print(line, file=stream if stream is not None else sys.stdout, flush=True)


class InfoLines:
    """The hot path's INFO lines (one per request, one per run transition), written without ``logging``.

    Measured on ``tasks/get``: a line through ``logging`` (record, caller lookup, lock,
    formatter, a flushed write) cost ~70 µs of CPU, more than the request it described
    (~60 µs). These lines have one shape, so they are formatted directly, in the handler's
    format, and written together: the first line of a batch schedules one write
    ``FLUSH_AFTER`` seconds later, which takes every line made meanwhile (a write per
    request line cost more than formatting it, measured). A SIGKILL loses at most that
    batch; a graceful stop writes it.
    """

    def __init__(self, stream: TextIO, fmt: str) -> None:
        self.stream = stream
        self.json = fmt == "json"
        self._pending: list[str] = []
        self._flush_soon = False
        self._second = -1
        self._stamp = ""

    def emit(self, logger: str, message: str, fields: dict[str, Any]) -> None:
        """Write one INFO line of ``logger`` (written within ``FLUSH_AFTER`` seconds)."""
        body = self._json_body(logger, message, fields) if self.json else self._text_body(logger, message, fields)
        self._write(self._prefix() + body + "\n")

    def shape(self, logger: str, message: str, fields: dict[str, Any], hole: str) -> Shape:
        """The fixed text of a line whose only changing field is ``hole``, for :meth:`emit_shaped`.

        A line that repeats (a request line: the same method, route, operation, status and
        principal, time after time) is formatted once; each later one only fills in ``hole``.
        """
        fields = {**fields, hole: _HOLE}
        if self.json:
            head, tail = self._json_body(logger, message, fields).split(_HOLE_JSON)
        else:
            head, tail = self._text_body(logger, message, fields).split(_HOLE)
        return Shape(head, tail + "\n")

    def emit_shaped(self, shape: Shape, value: int | float) -> None:
        """Write the line ``shape`` describes, with ``value`` in its hole."""
        self._write(f"{self._prefix()}{shape.head}{value}{shape.tail}")

    def _write(self, line: str) -> None:
        self._pending.append(line)
        if not self._flush_soon:
            try:
                asyncio.get_running_loop().call_later(FLUSH_AFTER, self.flush)
                self._flush_soon = True
            except RuntimeError:  # no loop: write at once
                self.flush()

    def flush(self) -> None:
        self._flush_soon = False
        if self._pending:
            data = "".join(self._pending)
            self._pending.clear()
            self.stream.write(data)
            self.stream.flush()

    def _prefix(self) -> str:
        """The line's start up to its time's milliseconds (the rest of the time is formatted once a second)."""
        now = time.time()
        second = int(now)
        if second != self._second:
            if self.json:
                stamp = '{"time":"' + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            else:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            self._second, self._stamp = second, stamp
        millis = int(now % 1 * 1000)
        return f'{self._stamp}.{millis:03d}Z",' if self.json else f"{self._stamp},{millis:03d} "

    @staticmethod
    def _text_body(logger: str, message: str, fields: dict[str, Any]) -> str:
        pairs = " ".join(f"{key}={_text(value)}" for key, value in fields.items())
        return f"INFO {logger}: {message} {pairs}"

    @staticmethod
    def _json_body(logger: str, message: str, fields: dict[str, Any]) -> str:
        line = {"level": "info", "logger": logger, "message": message, **fields}
        return orjson.dumps(line, default=str).decode()[1:]  # after the "{": the time comes first


class Shape(NamedTuple):
    """A line's text before and after its one changing field."""

    head: str
    tail: str


#: the stand-in for a shaped line's changing field while the rest is formatted (bare in text lines)
_HOLE: Final = "\x00hole\x00"
_HOLE_JSON: Final = orjson.dumps(_HOLE).decode()


def configure(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> InfoLines | None:
    """Send every logger's records at ``level`` or above to ``stream`` (stderr) in ``fmt``.

    Returns the writer of the hot path's INFO lines, or None when ``level`` is above INFO.
    """
    if level not in LOG_LEVELS:
        raise ValueError(f"--log-level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    if fmt not in LOG_FORMATS:
        raise ValueError(f"--log-format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    stream = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    if fmt == "json":
        logging.captureWarnings(True)  # a library's warning is a record too, not a bare line on stderr
    if level not in ("debug", "info"):
        return None
    lines = InfoLines(stream, fmt)
    atexit.register(lines.flush)
    return lines
