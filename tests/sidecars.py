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
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

__all__ = ["SidecarUnavailable", "require_sidecar", "sidecar_python"]

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
