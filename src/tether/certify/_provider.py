"""A provider for the effect-retry seam: it cuts the first connection after reading it, then answers 200.

The host's outbound effect meets a real transport failure on its first attempt and is
retried; the provider records the ``Idempotency-Key`` each attempt carried, so the keys
compared are the ones that crossed the wire, not only what the host's ledger says. Given a
certificate (certify's ``--receiver-certfile``), it speaks TLS, so a host whose egress guard
admits only https reaches it.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from types import TracebackType

__all__ = ["EffectProvider"]


class EffectProvider:
    """A loopback HTTP listener; ``keys`` are the ``Idempotency-Key`` headers of the requests it read, in order."""

    def __init__(self, fail_first: int = 1, *, certfile: str | None = None, keyfile: str | None = None) -> None:
        self._fail_first = fail_first
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self._tls: ssl.SSLContext | None = None
        if certfile is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(certfile, keyfile)
        scheme = "https" if self._tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._listener.getsockname()[1]}/effect"
        self.keys: list[str | None] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="certify-provider", daemon=True)

    def __enter__(self) -> EffectProvider:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()

    def arrivals(self) -> list[str | None]:
        with self._lock:
            return list(self.keys)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._tls is not None:
                try:
                    conn.settimeout(5)
                    conn = self._tls.wrap_socket(conn, server_side=True)
                except (OSError, ssl.SSLError):
                    conn.close()
                    continue
            with conn:
                conn.settimeout(5)
                key = self._read_key(conn)
                with self._lock:
                    self.keys.append(key)
                    cut = len(self.keys) <= self._fail_first
                if cut:  # a transport failure: the connection ends with no answer
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
                    continue
                body = b"{}"
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)

    @staticmethod
    def _read_key(conn: socket.socket) -> str | None:
        data = b""
        try:
            while b"\r\n\r\n" not in data and len(data) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        for line in data.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "idempotency-key":
                return value.strip()
        return None
