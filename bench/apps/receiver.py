"""A fast HTTPS receiver for the outbox scenario: raw asyncio on uvloop, answers 204, stamps receipt.

    python bench/apps/receiver.py --cert CERT --key KEY [--port 0]

A Python receiver can be slower than the outbox it measures; this one does the least a
receiver can: one ``asyncio.Protocol`` per connection, HTTP/1.1 keep-alive, a request split
on its blank line and its ``Content-Length``, a fixed ``204 No Content`` written back. The
wall-clock time (``time.time()``, the clock the host stamps its events with) is taken when
the request's last byte arrives, before anything else is done with it; the ``webhook-id``
header and the first ``"timestamp":"…"`` of the body (the event's commit time) are sliced
out with ``bytes.find``, no JSON is parsed. Several processes can share one port
(``SO_REUSEPORT``): start the first with ``--port 0`` and the others on the port it prints.

The harness drives it over stdin, one command a line, each answered on stdout:
``count`` (requests received), ``dump PATH`` (every receipt as JSON lines: time, id,
timestamp, path; answers the count) and ``reset``. EOF on stdin ends the process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import ssl
import sys
import time
from typing import Any

_END = b"\r\n\r\n"
_ANSWER = b"HTTP/1.1 204 No Content\r\n\r\n"
_STAMP = b'"timestamp":"'

#: (receipt time, webhook-id, the body's first timestamp, path) per request
receipts: list[tuple[float, str, str, str]] = []


def _header(head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case) in a raw header block, or None."""
    lowered = head.lower()
    at = lowered.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


class Connection(asyncio.Protocol):
    """One keep-alive connection: requests split as they arrive, each answered 204."""

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: Any = None  # uvloop's TLS transport is no asyncio.Transport subclass

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.time()
        buffer = self.buffer + data if self.buffer else data
        answers = 0
        while True:
            end = buffer.find(_END)
            if end < 0:
                break
            head = buffer[:end]
            length = int(_header(head, b"content-length") or b"0")
            if len(buffer) < end + 4 + length:
                break
            body = buffer[end + 4 : end + 4 + length]
            first_line = head[: head.find(b"\r\n")]
            path = first_line.split(b" ")[1].decode("latin-1") if b" " in first_line else ""
            stamp = ""
            at = body.find(_STAMP)
            if at >= 0:
                start = at + len(_STAMP)
                stamp = body[start : body.find(b'"', start)].decode("ascii", "replace")
            delivery = (_header(head, b"webhook-id") or b"").decode("latin-1")
            receipts.append((now, delivery, stamp, path))
            answers += 1
            buffer = buffer[end + 4 + length :]
        self.buffer = buffer
        if answers and self.transport is not None:
            self.transport.write(_ANSWER * answers)


async def _commands() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().strip():
        command, _, argument = line.partition(" ")
        if command == "dump":
            with open(argument, "w") as f:
                for t, delivery, stamp, path in receipts:
                    f.write(json.dumps([t, delivery, stamp, path]) + "\n")
        elif command == "reset":
            receipts.clear()
        print(len(receipts), flush=True)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", args.port))
    server = await asyncio.get_running_loop().create_server(Connection, sock=sock, ssl=context, backlog=1024)
    print(f"listening {sock.getsockname()[1]}", flush=True)
    async with server:
        await _commands()  # until the harness closes stdin


if __name__ == "__main__":
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
