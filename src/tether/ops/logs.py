"""The host's log: one line per record, as text for a terminal or JSON for a collector.

``--log-level`` picks the threshold and ``--log-format`` the shape. uvicorn's loggers
propagate to the same root handler, so every line of the process has one format. A
record's structured fields (``extra={"fields": {...}}``) become JSON members, or
``key=value`` pairs after the message in text.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any, Final, TextIO

import orjson

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "JsonFormatter", "TextFormatter", "configure", "fields_of"]

LOG_LEVELS: Final = ("debug", "info", "warning", "error")
LOG_FORMATS: Final = ("text", "json")


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a record carries (``extra={"fields": {...}}``), or none."""
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


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
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(fields_of(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> logging.Handler:
    """Send every logger's records at ``level`` or above to ``stream`` (stderr) in ``fmt``; returns the handler."""
    if level not in LOG_LEVELS:
        raise ValueError(f"--log-level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    if fmt not in LOG_FORMATS:
        raise ValueError(f"--log-format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
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
    return handler
