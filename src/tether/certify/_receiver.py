"""The webhook receiver ``tether certify --receiver-listen`` runs: scoped paths that fail the first attempts.

Each exercise of the durable-delivery file gets a path of its own (``/rx/<nonce>``) that
answers 500 to the first ``fail_first`` attempts of each delivery (keyed as the suite keys
them: subscription, run, sequence) and 204 after; a closed path answers 404. It speaks
plain HTTP on the address it listens on, or HTTPS with a certificate; the host reaches it
at ``public_url``: for the floor as written, a public https front (a tunnel) to that
address, so the host's egress guard can stay fully on.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from tether.certify.session import Attempt

__all__ = ["ScopedReceiver"]


class ScopedReceiver:
    """A ``WebhookReceiver`` on ``listen`` (``host:port``; port 0 picks one), reached by the host at ``public_url``."""

    def __init__(
        self, listen: str, public_url: str | None = None, *, certfile: str | None = None, keyfile: str | None = None
    ) -> None:
        host, _, port = listen.rpartition(":")
        self._lock = threading.Lock()
        self._fail_first: dict[str, float] = {}
        self._seen: dict[tuple[str, str], int] = {}
        self._attempts: dict[str, list[Attempt]] = {}
        self._server = ThreadingHTTPServer((host or "127.0.0.1", int(port or 0)), self._handler())
        self._server.daemon_threads = True
        if certfile is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile, keyfile)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        bound_host, bound_port = self._server.server_address[:2]
        scheme = "https" if certfile is not None else "http"
        self.public_url = (public_url or f"{scheme}://{bound_host!s}:{bound_port}").rstrip("/")
        self._thread = threading.Thread(target=self._server.serve_forever, name="certify-receiver", daemon=True)

    def __enter__(self) -> ScopedReceiver:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def exercise(self, fail_first: float) -> str:
        path = f"/rx/{uuid.uuid4().hex}"
        with self._lock:
            self._fail_first[path] = fail_first
            self._attempts[path] = []
        return path

    def url(self, path: str) -> str:
        return self.public_url + path

    def close(self, path: str) -> None:
        with self._lock:
            self._fail_first.pop(path, None)

    def attempts(self, path: str) -> list[Attempt]:
        with self._lock:
            return list(self._attempts.get(path, []))

    def _answer(self, path: str, headers: dict[str, str], body: bytes) -> int:
        run_id: str | None = None
        sequence: object = None
        try:
            parsed = json.loads(body)
            run_id = parsed.get("runId") if isinstance(parsed.get("runId"), str) else None
            sequence = (parsed.get("event") or {}).get("sequence")
        except (ValueError, AttributeError):
            pass  # not JSON: still an attempt
        webhook_id = headers.get("openwop-webhook-id") or headers.get("x-openwop-webhook-id") or ""
        attempt = Attempt(run_id, webhook_id, sequence if isinstance(sequence, int) else None, 0, time.monotonic())
        with self._lock:
            fail_first = self._fail_first.get(path)
            if fail_first is None:
                return 404
            n = self._seen[(path, attempt.key)] = self._seen.get((path, attempt.key), 0) + 1
            status = 500 if n <= fail_first else 204
            self._attempts[path].append(
                Attempt(attempt.run_id, attempt.webhook_id, attempt.sequence, status, attempt.at)
            )
        return status

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                self.send_response(receiver._answer(self.path, headers, body))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:  # quiet: the bundle is the record
                pass

        return Handler
