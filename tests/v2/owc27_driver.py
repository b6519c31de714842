"""The test side of ``owc27/driver.py``: openwop-client 2.7.0 in its own environment, one JSON line per call.

    with Owc27() as owc:
        owc.connect(host.url, key)
        created = owc.call("runs_create", body={"workflowId": "echo"})
        events = owc.call("runs_events", created["runId"], kwargs={"stream_mode": "updates"})

``call`` returns what the client's method returned (its dataclasses as dicts); it raises
``ClientRefused`` carrying what the client raised (``WopError`` with its status and
envelope, or any other exception with its type and trace).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sidecars import SidecarDriver

HERE = Path(__file__).resolve().parent / "owc27"
REQUIREMENTS = HERE / "requirements.txt"
DRIVER = HERE / "driver.py"
#: the environment's name in the cache
ENV_NAME = "openwop-client-2.7"


class ClientRefused(Exception):
    """The client raised: ``kind`` is its exception class, ``status`` and ``envelope`` a ``WopError``'s."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.kind: str = error["type"]
        self.status: int | None = error.get("status")
        self.envelope: dict[str, Any] | None = error.get("envelope")
        self.raw: str | None = error.get("raw")
        super().__init__(f"{self.kind} {self.status}: {error['message']}\n{self.raw or ''}{error.get('trace', '')}")


class Owc27(SidecarDriver):
    """One openwop-client 2.7.0 process; its clients are made by ``connect`` and named by ``as_``."""

    def __init__(self, *, timeout: float = 60.0) -> None:
        super().__init__(ENV_NAME, REQUIREMENTS, DRIVER, timeout=timeout)

    def _answer(self, op: str, timeout: float | None, **args: Any) -> Any:
        answer = self.raw(op, timeout=timeout, **args)
        if "error" in answer:
            raise ClientRefused(answer["error"])
        return answer["result"]

    def connect(self, url: str, key: str, *, as_: str = "main") -> dict[str, Any]:
        """``OpenwopClient(url, key)``, every other setting the client's default."""
        made: dict[str, Any] = self._answer("connect", None, url=url, key=key, **{"as": as_})
        return made

    def call(
        self,
        method: str,
        *args: Any,
        body: dict[str, Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        limit: int | None = None,
        as_: str = "main",
        timeout: float | None = None,
    ) -> Any:
        """``client.<method>(*args, <body as its request type>, **kwargs)``; an iterator drained (``limit`` items)."""
        request: dict[str, Any] = {"method": method, "args": list(args), "kwargs": kwargs or {}, "as": as_}
        if body is not None:
            request["body"] = body
        if limit is not None:
            request["limit"] = limit
        return self._answer("call", timeout, **request)
