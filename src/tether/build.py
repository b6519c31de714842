"""Which build of Tether is running: the digest the effect-seam manifest and a certification bundle name."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__all__ = ["package_digest"]


@functools.cache
def package_digest() -> str:
    """SHA-256 over this install's ``tether`` package files (relative paths and bytes, in path order).

    Computed once per process: the files do not change under a running host, and two hosts
    installed from one artifact name the same build.
    """
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
