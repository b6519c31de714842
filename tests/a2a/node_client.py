"""A pinned Node project for interop tests: installed once per lockfile, then run as a script per scenario.

``NodeProject(Path("tests/a2a/js13"))`` names a folder holding ``package.json``, a committed
``package-lock.json`` and the scripts. ``install()`` runs ``npm ci`` once into the cache
``${XDG_CACHE_HOME:-~/.cache}/tether/node/<folder>-<sha256 of the lockfile, short>``: in a
temporary folder beside it, renamed into place when complete, so a half-done install
is never used and concurrent installs cannot clash (the loser's copy is discarded).
The scripts are copied into the install (ESM resolves packages from the script's own
folder, never from ``NODE_PATH``), under a name carrying their own digest.

Without ``node`` (20 or later) or ``npm``, or when ``npm ci`` fails, the tests skip,
except under CI (``CI=true``, as for PostgreSQL in ``pg.py``), where they fail: a CI
run that silently skipped a real client would prove nothing about it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

__all__ = ["NodeProject", "NodeRun"]

NODE_MAJOR_MIN = 20
_INSTALL_TIMEOUT = 300.0


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tether" / "node"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


class NodeRun:
    """One finished script run: its exit code, its one JSON document (``doc``) and its stderr."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str) -> None:
        self.args = args
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        try:
            self.doc: dict[str, Any] = json.loads(stdout)
        except json.JSONDecodeError:
            self.doc = {}

    def __repr__(self) -> str:
        tail = f"stdout={self.stdout[-2000:]!r}, stderr={self.stderr[-2000:]!r}"
        return f"NodeRun({self.args!r}, rc={self.returncode}, {tail})"


class NodeProject:
    """A folder's pinned Node dependencies, installed into the cache on first use."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.lock = source / "package-lock.json"
        self._installed: Path | None = None

    @property
    def target(self) -> Path:
        return _cache_root() / f"{self.source.name}-{_digest(self.lock.read_bytes())}"

    def install(self) -> Path:
        """The installed folder (``npm ci`` the first time); skips or fails when Node cannot provide it."""
        if self._installed is not None:
            return self._installed
        node, npm = shutil.which("node"), shutil.which("npm")
        if node is None or npm is None:
            _unavailable(f"node and npm are needed for {self.source.name} (found node={node}, npm={npm})")
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        major = re.match(r"v(\d+)\.", version)
        if major is None or int(major.group(1)) < NODE_MAJOR_MIN:
            _unavailable(f"{self.source.name} needs Node {NODE_MAJOR_MIN} or later, found {version or 'nothing'}")
        target = self.target
        if not (target / "node_modules").is_dir():
            self._npm_ci(npm, target)
        self._installed = target
        return target

    def _npm_ci(self, npm: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copy2(self.source / name, staging / name)
            try:
                done = subprocess.run(
                    [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                    cwd=staging,
                    capture_output=True,
                    text=True,
                    timeout=_INSTALL_TIMEOUT,
                )
            except subprocess.TimeoutExpired:
                _unavailable(f"npm ci for {self.source.name} took more than {_INSTALL_TIMEOUT:.0f}s")
            if done.returncode != 0:
                _unavailable(f"npm ci for {self.source.name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            try:
                staging.rename(target)
            except OSError:  # another process installed the same lockfile first: use theirs
                if not (target / "node_modules").is_dir():
                    raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    def script(self, name: str) -> Path:
        """The installed copy of the script ``name`` (copied in, atomically, the first time this version runs)."""
        source = self.source / name
        body = source.read_bytes()
        installed = self.install() / "scripts" / f"{source.stem}-{_digest(body)}{source.suffix}"
        if not installed.exists():
            installed.parent.mkdir(exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=installed.parent, prefix=".")
            with os.fdopen(fd, "wb") as out:
                out.write(body)
            os.replace(temporary, installed)
        return installed

    def run(self, name: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> NodeRun:
        """Run a script to its end with ``args`` (its stdout is one JSON document)."""
        script = self.script(name)
        argv = ["node", str(script), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
        return NodeRun(argv, done.returncode, done.stdout, done.stderr)
