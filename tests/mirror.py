"""A local stand-in for raw.githubusercontent.com: fixed bytes by URL path, every request recorded.

Tests of the schema download point ``TETHER_SCHEMAS_BASE_URL`` here, so they need no
internet and can serve a corrupted file on purpose. It listens on 127.0.0.1 port 0 in a
thread; use it as a context manager so the thread and socket are always closed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Self

from schemas_source import Manifest, PinnedFile

__all__ = ["Mirror", "manifest_files", "url_path"]


def url_path(manifest: Manifest, pinned: PinnedFile) -> str:
    """The path a mirror serves ``pinned`` at: its URL without the manifest's base."""
    return "/" + pinned.url.removeprefix(manifest.base_url)


def manifest_files(manifest: Manifest, folders: Mapping[str, Path]) -> dict[str, bytes]:
    """The bytes of every pinned file, by the path a mirror serves it at, read from each group's folder."""
    return {
        url_path(manifest, pinned): (folders[name] / pinned.path).read_bytes()
        for name, group in manifest.groups.items()
        for pinned in group.files
    }


class Mirror:
    """Serves ``files`` (URL path to bytes) over plain HTTP; anything else is a 404."""

    def __init__(self, files: Mapping[str, bytes]) -> None:
        self.files = dict(files)
        self.requests: list[str] = []
        self._lock = threading.Lock()
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with mirror._lock:
                    mirror.requests.append(self.path)
                    body = mirror.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the recorded ``requests`` are what tests look at."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        # a short poll interval: shutdown() waits for the loop to notice, up to one interval
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="schema-mirror", daemon=True
        )

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def served(self) -> list[str]:
        with self._lock:
            return list(self.requests)

    def corrupt(self, path: str) -> bytes:
        """Change one file's bytes (still valid JSON: a trailing space), so only a hash check can notice."""
        with self._lock:
            self.files[path] = self.files[path] + b" "
            return self.files[path]
