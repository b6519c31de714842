"""A real HTTPS receiver on loopback, with a test CA, for pushes and webhooks.

It records every request (path, headers, body) and answers from a script: a list of
statuses (the last repeats) or a function. ``stop()`` and ``start()`` keep its port, so
a test can take the receiver down and bring it back where the host expects it. With
``keep_alive`` it speaks HTTP/1.1 and keeps connections open; ``connections`` counts the
TCP connections it accepted either way.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trustme


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    def __init__(self, ca: trustme.CA, folder: Path, *, keep_alive: bool = False) -> None:
        self.ca = ca
        self.ca_file = folder / "receiver-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        cert = ca.issue_cert("127.0.0.1")
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert.configure_cert(self._context)
        self.requests: list[Received] = []
        self.script: list[int] | Callable[[Received], tuple[int, dict[str, str]]] = [204]
        self._lock = threading.Lock()
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.keep_alive = keep_alive
        self.connections = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def url(self, path: str = "/push") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def _answer(self, received: Received) -> tuple[int, dict[str, str]]:
        with self._lock:
            self.requests.append(received)
            if callable(self.script):
                return self.script(received)
            status = self.script[0] if len(self.script) == 1 else self.script.pop(0)
            return status, {}

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if receiver.keep_alive else "HTTP/1.0"
            disable_nagle_algorithm = True

            def setup(self) -> None:
                with receiver._lock:
                    receiver.connections += 1
                super().setup()

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if len(body) < length:  # the sender went away mid-request (a host killed): no request
                    self.close_connection = True
                    return
                received = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                status, headers = receiver._answer(received)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

        server = Server(("127.0.0.1", self.port), Handler)
        server.socket = self._context.wrap_socket(server.socket, server_side=True)
        self._server = server
        # shutdown() waits for the serving loop to look at its flag: every 20 ms, not the default 500
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="test-receiver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def bodies(self, path: str | None = None) -> list[bytes]:
        with self._lock:
            return [r.body for r in self.requests if path is None or r.path == path]


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    """A started receiver with a CA of its own (a suite-wide fixture: ``pytest_plugins`` names this module)."""
    rx = Receiver(trustme.CA(), tmp_path).start()
    yield rx
    rx.stop()


def egress_to(receiver: Receiver) -> tuple[str, ...]:
    """The operator switches that let a host reach ``receiver``: its loopback address and its CA."""
    return ("--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-bundle", str(receiver.ca_file))
