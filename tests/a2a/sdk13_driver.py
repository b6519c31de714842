"""The test side of ``sdk13/driver.py``: a2a-sdk 1.3.0 in its own environment, one JSON line per call.

    with Sdk13() as sdk:
        chosen = sdk.call("connect", url=host.url, key=key)
        task = sdk.call("send", text="hi", stream=False)["events"][0]["task"]

``call`` returns the op's result; it raises ``SdkRefused`` (with the SDK's error type,
message and data) when the SDK raised, and fails the test when the outside oracle found
anything wrong in what the host sent (see the driver's docstring). The process is killed
on ``close``; a call that takes longer than its deadline fails instead of hanging.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sidecars import SidecarDriver

HERE = Path(__file__).resolve().parent / "sdk13"
REQUIREMENTS = HERE / "requirements.txt"
DRIVER = HERE / "driver.py"
#: the environment's name in the cache
ENV_NAME = "a2a-sdk-1.3"


class SdkRefused(Exception):
    """The SDK raised: ``kind`` is its exception class (``TaskNotFoundError`` …)."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.kind: str = error["type"]
        self.message: str = error["message"]
        self.data: Any = error.get("data")
        super().__init__(f"{self.kind}: {self.message}\n{error.get('trace', '')}")


class Sdk13(SidecarDriver):
    """One driver process (start it with ``with``, or ``start()``/``close()``)."""

    def __init__(self, *, timeout: float = 60.0) -> None:
        super().__init__(ENV_NAME, REQUIREMENTS, DRIVER, timeout=timeout)
        #: how many exchanges the oracle has checked so far
        self.checked = 0

    def call(self, op: str, *, timeout: float | None = None, **args: Any) -> Any:
        """The op's result, after the oracle's verdict on every answer the host sent for it."""
        answer = self.raw(op, timeout=timeout, **args)
        wire = answer.get("wire")
        if wire is not None:
            assert not wire["problems"], f"the A2A 1.0 proto oracle refused what the host sent for {op}: {wire}"
            self.checked += wire["checked"]
        if "error" in answer:
            raise SdkRefused(answer["error"])
        return answer["result"]
