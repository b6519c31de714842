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

import itertools
import json
import queue
import subprocess
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from sidecars import require_sidecar

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


class Sdk13:
    """One driver process (start it with ``with``, or ``start()``/``close()``)."""

    def __init__(self, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader: threading.Thread | None = None
        #: the driver's stderr, in a file (a pipe nobody drains could fill and stall it)
        self._stderr: IO[str] | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        #: how many exchanges the oracle has checked so far
        self.checked = 0

    def start(self) -> Sdk13:
        python = require_sidecar(ENV_NAME, REQUIREMENTS)
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [str(python), str(DRIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def __enter__(self) -> Sdk13:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        try:
            proc.stdin.close()
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        finally:
            if self._reader is not None:
                self._reader.join(10)  # it ends at the driver's EOF
            if proc.stdout is not None:
                proc.stdout.close()
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None

    def stderr(self) -> str:
        """What the driver has written to stderr so far."""
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read()

    def raw(self, op: str, *, timeout: float | None = None, **args: Any) -> dict[str, Any]:
        """The driver's whole answer: ``result`` or ``error``, and ``wire`` (what the oracle checked)."""
        assert self.proc is not None and self.proc.stdin is not None, "not started"
        with self._lock:
            request_id = next(self._ids)
            self.proc.stdin.write(json.dumps({"id": request_id, "op": op, "args": args}) + "\n")
            self.proc.stdin.flush()
            try:
                line = self._lines.get(timeout=timeout or self.timeout)
            except queue.Empty:
                raise AssertionError(f"the a2a-sdk 1.3.0 driver did not answer {op} in time") from None
            if line is None:
                raise AssertionError(f"the a2a-sdk 1.3.0 driver exited during {op}:\n{self.stderr()}")
        answer: dict[str, Any] = json.loads(line)
        assert answer["id"] == request_id
        return answer

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
