"""A scripted A2A agent on loopback HTTPS that speaks exactly one version and keeps every request it gets.

Its card offers JSON-RPC in ``version`` only (``"1.0"``: a 1.0 ``supportedInterfaces``
entry; ``"0.3"``: a legacy 0.3 card), every task it is sent completes at once, and a call
whose ``A2A-Version`` is not its own is answered ``-32009`` (VersionNotSupportedError),
its details as the ``Any[]`` array A2A 1.0 writes (or, with ``legacy_error_data``, the bare
object older peers wrote). ``requests`` holds (method, path,
lower-cased headers) of each request, the card's ``GET`` included.
"""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


class VersionPeer:
    def __init__(self, folder: Path, version: str) -> None:
        ca = trustme.CA()
        self.ca_file = folder / f"peer-{version}-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        self.version = version
        self.legacy_error_data = False
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self._lock = threading.Lock()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                peer._keep("GET", self.path, self.headers.items())
                self._answer(peer.card())

            def do_POST(self) -> None:  # noqa: N802
                peer._keep("POST", self.path, self.headers.items())
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                asked = self.headers.get("A2A-Version", "0.3")
                if asked != peer.version:
                    detail = {"@type": _INFO, "reason": "VERSION_NOT_SUPPORTED", "domain": "a2a-protocol.org"}
                    data = detail if peer.legacy_error_data else [detail]
                    error = {"code": -32009, "message": f"version {asked} not supported", "data": data}
                    self._answer({"jsonrpc": "2.0", "id": request.get("id"), "error": error})
                    return
                self._answer({"jsonrpc": "2.0", "id": request.get("id"), "result": peer.task()})

            def _answer(self, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def _keep(self, method: str, path: str, headers: Any) -> None:
        with self._lock:
            self.requests.append((method, path, {k.lower(): v for k, v in headers}))

    def posts(self) -> list[dict[str, str]]:
        """The headers of every JSON-RPC call it was sent (the card's reads left out)."""
        with self._lock:
            return [headers for method, _, headers in self.requests if method == "POST"]

    def card(self) -> dict[str, Any]:
        rpc = self.url + "/rpc"
        if self.version == "0.3":
            return {"protocolVersion": "0.3.0", "name": "peer", "url": rpc, "preferredTransport": "JSONRPC"}
        interface = {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": self.version}
        return {"name": "peer", "supportedInterfaces": [interface], "capabilities": {}}

    def task(self) -> dict[str, Any]:
        if self.version == "0.3":
            return {"kind": "task", "id": "task-1", "contextId": "ctx-1", "status": {"state": "completed"}}
        return {"task": {"id": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED"}}}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
