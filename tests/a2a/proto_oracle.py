"""A2A 1.0 answers checked by an outside oracle: a2a-sdk 1.3.0's own protobuf models.

The raw-wire 1.0 tests of the main environment (which pins a2a-sdk 0.3.26) cannot import
those models, so one long-lived sidecar process (``sdk13/driver.py`` in its own
environment) parses each document with ``json_format.Parse(raw, a2a_pb2.<Type>())``,
without ``ignore_unknown_fields``: a field outside the 1.0 proto fails::

    validate_v10("Task", body["result"])
    validate_v10("JsonRpc:GetTask", body)              # a whole answer: envelope, result or error details
    validate_v10("JsonRpcStream:SubscribeToTask", event)  # one SSE event of a 1.0 stream
    validate_v10("AgentCard+0.3", card)                # the card both generations read (a2a-v1.0-wire §2.4)

Type names are a2a_pb2's (``Task``, ``SendMessageResponse``, ``StreamResponse``,
``ListTasksResponse``, ``TaskPushNotificationConfig``,
``ListTaskPushNotificationConfigsResponse``, ``AgentCard``) plus ``Empty`` and ``Any``.
The process starts on first use, is shared by the whole session, and ends with it.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

from sdk13_driver import Sdk13

__all__ = ["close_oracle", "validate_v10"]

_lock = threading.Lock()
_oracle: list[Sdk13] = []


def _driver() -> Sdk13:
    with _lock:
        if not _oracle:
            _oracle.append(Sdk13().start())
        return _oracle[0]


def validate_v10(type_name: str, doc: Any) -> None:
    """AssertionError naming every problem when ``doc`` is not a valid A2A 1.0 ``type_name``."""
    problems = _driver().call("validate", type=type_name, doc=doc)["problems"]
    assert not problems, f"not a valid A2A 1.0 {type_name} (a2a_pb2, strict): {problems}\n{doc!r:.2000}"


def close_oracle() -> None:
    """Stop the oracle's process (it starts again if used after)."""
    with _lock:
        while _oracle:
            _oracle.pop().close()


atexit.register(close_oracle)
