"""Virtual environments for clients whose dependencies clash with the main test environment's.

The suite pins ``a2a-sdk==0.3.26`` (the 0.3 interop suite), so a client of another
generation (``a2a-sdk==1.3.0``) runs as a subprocess in an environment of its own, made
from a pinned requirements file:

    python = require_sidecar("a2a-sdk-1.3", Path("tests/a2a/sdk13/requirements.txt"))
    subprocess.run([str(python), "driver.py"])

The environment is made once and cached under
``${XDG_CACHE_HOME:-~/.cache}/tether/envs/<name>-<sha256 of the file, 12 hex>``: a changed
requirements file is a new environment, never a stale one. It is built in a temporary
directory beside its final place and renamed there when ``pip install`` has succeeded, under
a file lock, so two pytest processes never see a half-built environment nor build it twice.
(Only ``bin/python`` is used afterwards: a renamed venv's interpreter finds its packages
through ``pyvenv.cfg`` beside it, while console scripts keep the temporary path in their
shebang.)

When it cannot be made (no route to the package index), the tests that need it skip with
the reason, except under CI (``CI=true``), where they fail: a CI run that silently skipped
an interop suite would prove nothing about it (the same rule as ``pg.py``).

``SidecarDriver`` runs a driver script in such an environment and speaks JSON lines with it,
one request and one answer at a time (``sdk13_driver.py``, ``v2/owc27_driver.py``).
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import pytest

__all__ = ["SidecarDriver", "SidecarUnavailable", "require_sidecar", "sidecar_python"]

#: a file in a finished environment: its presence is what "built" means
_DONE = ".tether-sidecar"
_PIP_TIMEOUT = 900.0

#: environments this process failed to make, with the reason (tried once per process)
_FAILED: dict[Path, str] = {}


class SidecarUnavailable(Exception):
    """The environment could not be made (its message says why)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tether" / "envs"


def env_dir(name: str, requirements: Path) -> Path:
    """Where the environment for ``requirements`` lives (named by the file's content)."""
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    return cache_root() / f"{name}-{digest}"


def _python(env: Path) -> Path:
    return env / "bin" / "python"


def _ready(env: Path) -> bool:
    return (env / _DONE).is_file() and _python(env).exists()


def _build(env: Path, requirements: Path) -> None:
    """Make the environment in a temporary directory beside ``env``, then rename it into place."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{env.name}-", dir=env.parent))
    try:
        made = subprocess.run([sys.executable, "-m", "venv", str(scratch)], capture_output=True, text=True, timeout=120)
        if made.returncode != 0:
            raise SidecarUnavailable(f"python -m venv failed: {made.stderr.strip()[-2000:]}")
        installed = subprocess.run(
            [
                str(_python(scratch)),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
                str(requirements),
            ],
            capture_output=True,
            text=True,
            timeout=_PIP_TIMEOUT,
        )
        if installed.returncode != 0:
            raise SidecarUnavailable(
                f"pip install -r {requirements} failed (exit {installed.returncode}): "
                f"{installed.stderr.strip()[-2000:]}"
            )
        (scratch / _DONE).write_text(requirements.read_text())
        scratch.rename(env)
    except subprocess.TimeoutExpired as exc:
        raise SidecarUnavailable(f"{exc.cmd[0]} timed out after {exc.timeout:.0f}s") from exc
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


def sidecar_python(name: str, requirements: Path) -> Path:
    """The interpreter of the environment ``requirements`` describes, made first if need be.

    Raises
    ------
    SidecarUnavailable
        When it cannot be made (the reason is the message).
    """
    env = env_dir(name, requirements)
    if _ready(env):
        return _python(env)
    if env in _FAILED:
        raise SidecarUnavailable(_FAILED[env])
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(env.parent / f"{env.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then look again
        try:
            if not _ready(env):
                if env.exists():  # a leftover without the marker: never trusted
                    shutil.rmtree(env)
                _build(env, requirements)
        except SidecarUnavailable as exc:
            _FAILED[env] = str(exc)
            raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return _python(env)


def require_sidecar(name: str, requirements: Path) -> Path:
    """``sidecar_python`` for a test: skips when the environment cannot be made, fails under CI."""
    try:
        return sidecar_python(name, requirements)
    except SidecarUnavailable as exc:
        message = f"no {name} environment ({requirements.name}): {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


class SidecarDriver:
    """A driver script in a sidecar environment, spoken to in JSON lines (``with``, or ``start()``/``close()``).

    Each request is ``{"id", "op", "args"}`` on the script's stdin; its answer is the next line
    on its stdout, ``{"id", "result"}`` or ``{"id", "error"}``. ``raw`` waits for it with a
    deadline, so a driver that hangs fails the test instead of stalling it, and one that
    exits fails it with its stderr. ``start`` skips (fails under CI) when the environment
    cannot be made; ``close`` ends the script at its stdin's EOF, or kills it.
    """

    def __init__(self, name: str, requirements: Path, script: Path, *, timeout: float = 60.0) -> None:
        self.name = name
        self.requirements = requirements
        self.script = script
        self.timeout = timeout
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader: threading.Thread | None = None
        #: the driver's stderr, in a file (a pipe nobody drains could fill and stall it)
        self._stderr: IO[str] | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def start(self) -> Self:
        python = require_sidecar(self.name, self.requirements)
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [str(python), str(self.script)],
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

    def __enter__(self) -> Self:
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
        """The driver's whole answer to one request."""
        assert self.proc is not None and self.proc.stdin is not None, "not started"
        with self._lock:
            request_id = next(self._ids)
            self.proc.stdin.write(json.dumps({"id": request_id, "op": op, "args": args}) + "\n")
            self.proc.stdin.flush()
            try:
                line = self._lines.get(timeout=timeout or self.timeout)
            except queue.Empty:
                raise AssertionError(f"the {self.name} driver did not answer {op} in time") from None
            if line is None:
                raise AssertionError(f"the {self.name} driver exited during {op}:\n{self.stderr()}")
        answer: dict[str, Any] = json.loads(line)
        assert answer["id"] == request_id
        return answer
