"""openwop-client 2.7.0, unmodified and with its defaults, driving a host: one JSON line per call.

Runs in its own environment (``requirements.txt`` beside it, made by ``tests/sidecars.py``):
the main test environment pins openwop-client 1.8.0, the same package name. It reads one
request a line on stdin and answers one line on stdout, in order::

    → {"id": 1, "op": "connect", "args": {"as": "main", "url": "http://127.0.0.1:PORT", "key": "tk_…"}}
    → {"id": 2, "op": "call", "args": {"method": "runs_create", "body": {"workflowId": "echo"}}}
    ← {"id": 2, "result": {"runId": "default/run_…", "status": "running", …}}

``call`` runs ``OpenwopClient.<method>(*args, <body as its request type>, **kwargs)`` on the
client made by ``connect`` under ``as`` (default ``main``). The result is the client's own
return value as JSON (its dataclasses as dicts); a method that returns an iterator (the SSE
consumer) is drained, at most ``limit`` items, and the iterator closed. When the client
raises, the answer is ``"error": {"type": "WopError", "status": 409, "envelope": {...}, "raw":
…}`` (``status`` for ``urllib``'s ``HTTPError`` too, which the SSE consumer raises), so the
test side asserts on exactly what a user of the client would catch.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import traceback
from collections.abc import Iterator
from typing import Any
from urllib.error import HTTPError

from openwop_client import OpenwopClient
from openwop_client.errors import WopError
from openwop_client.types import (
    BulkCancelRunsRequest,
    CancelRunRequest,
    CreateRunRequest,
    PauseRunRequest,
    RegisterWebhookRequest,
    ResolveInterruptRequest,
    ResumeRunRequest,
)

#: the request type each method takes its body as (the last positional argument)
BODIES: dict[str, type] = {
    "runs_create": CreateRunRequest,
    "runs_cancel": CancelRunRequest,
    "runs_pause": PauseRunRequest,
    "runs_resume": ResumeRunRequest,
    "runs_bulk_cancel": BulkCancelRunsRequest,
    "webhooks_register": RegisterWebhookRequest,
    "interrupts_resolve_by_run": ResolveInterruptRequest,
    "interrupts_resolve_by_token": ResolveInterruptRequest,
}


def jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


class Driver:
    def __init__(self) -> None:
        self.clients: dict[str, OpenwopClient] = {}

    def op_connect(self, args: dict[str, Any]) -> dict[str, Any]:
        """A client with the defaults (``major`` 2, 30 s timeout); only the origin and the key are ours."""
        client = OpenwopClient(args["url"], args["key"])
        self.clients[args.get("as", "main")] = client
        return {"protocolVersion": client.protocol_version, "clientVersion": client.client_version}

    def op_call(self, args: dict[str, Any]) -> Any:
        client = self.clients[args.get("as", "main")]
        method = args["method"]
        positional = list(args.get("args", []))
        if "body" in args:
            positional.append(BODIES[method](**args["body"]))
        result = getattr(client, method)(*positional, **args.get("kwargs", {}))
        if isinstance(result, Iterator):
            try:
                return [jsonable(item) for item in itertools.islice(result, args.get("limit"))]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()  # a generator: ends its connection now, as a caller breaking out of the loop does
        return jsonable(result)


def refusal(exc: BaseException) -> dict[str, Any]:
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, WopError):
        error.update(status=exc.status, envelope=jsonable(exc.envelope), raw=exc.raw_text)
    elif isinstance(exc, HTTPError):
        error.update(status=exc.code, raw=exc.read().decode("utf-8", errors="replace"))
    else:
        error["trace"] = traceback.format_exc(limit=8)
    return error


def main() -> None:
    driver = Driver()
    for line in sys.stdin:
        request = json.loads(line)
        answer: dict[str, Any] = {"id": request.get("id")}
        try:
            op = getattr(driver, f"op_{request['op']}", None)
            if op is None:
                raise ValueError(f"no op {request['op']!r}")
            answer["result"] = op(request.get("args", {}))
        except Exception as exc:  # what the client raised is an answer the test asserts on
            answer["error"] = refusal(exc)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
