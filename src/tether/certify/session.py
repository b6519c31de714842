"""What the checks run against: the host's URL and keys, the official schemas, a webhook receiver, and helpers.

The checks talk to the host over HTTP as the official suite's driver does (``Accept:
application/json``, ``OpenWOP-Version: 2.0``, the Bearer key, ids in paths written with
``encodeURIComponent``), so they hold any host to the same requests, not only Tether.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx

from tether.certify.ledger import Blocked, Failed

__all__ = ["Attempt", "SchemaDir", "Schemas", "Session", "WebhookReceiver", "enc", "project", "wait_for"]

T = TypeVar("T")
TERMINAL = ("completed", "failed", "cancelled")


def enc(value: str) -> str:
    """JavaScript's ``encodeURIComponent`` (``/`` as ``%2F``): how the suite writes most ids into paths."""
    return quote(value, safe="-_.!~*'()")


def project(bound: str) -> str:
    """The v2 path projection of a bound id: bytes outside ``[A-Za-z0-9._-]`` as ``~`` and two hex digits."""
    kept = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    return "".join(chr(b) if b in kept else f"~{b:02X}" for b in bound.encode())


class Schemas(Protocol):
    """The official JSON Schemas: the errors ``document`` has against ``name`` (``v2/capabilities``)."""

    def errors(self, name: str, document: Any) -> list[str]: ...

    def event_types(self) -> set[str]: ...


class SchemaDir:
    """The official schemas from a folder holding ``openwop/v2/*.schema.json`` (needs the ``jsonschema`` package)."""

    def __init__(self, folder: Path) -> None:
        try:
            import jsonschema  # type: ignore[import-untyped,unused-ignore]
            import referencing
            import referencing.jsonschema
        except ImportError as exc:  # a runtime extra, not a dependency of the host
            needs = "checking against the official schemas needs jsonschema: pip install 'tether[certify]'"
            raise RuntimeError(needs) from exc
        self._folder = folder
        self._jsonschema: Any = jsonschema
        resources = []
        self._ids: dict[str, str] = {}
        for path in sorted((folder / "openwop" / "v2").glob("*.schema.json")):
            schema = json.loads(path.read_text(encoding="utf-8"))
            name = "v2/" + path.name.removesuffix(".schema.json")
            self._ids[name] = schema["$id"]
            spec: Any = referencing.jsonschema.DRAFT202012
            resources.append((schema["$id"], referencing.Resource.from_contents(schema, default_specification=spec)))
        if not self._ids:
            raise RuntimeError(f"no openwop/v2/*.schema.json under {folder}")
        self._registry: Any = referencing.Registry().with_resources(resources).crawl()

    def errors(self, name: str, document: Any) -> list[str]:
        file, _, fragment = name.partition("#")
        ref = self._ids[file] + (f"#{fragment}" if fragment else "")
        validator = self._jsonschema.Draft202012Validator(
            {"$ref": ref},
            registry=self._registry,
            format_checker=self._jsonschema.Draft202012Validator.FORMAT_CHECKER,
        )
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(document)
        ]

    def event_types(self) -> set[str]:
        schema = json.loads((self._folder / "openwop/v2/run-event.schema.json").read_text(encoding="utf-8"))
        return {t for branch in schema["properties"]["type"]["oneOf"] for t in branch.get("enum", [])}


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt a receiver saw."""

    run_id: str | None
    webhook_id: str
    sequence: int | None
    status: int
    at: float

    @property
    def key(self) -> str:
        return f"{self.webhook_id}|{self.run_id or ''}|{self.sequence}"


class WebhookReceiver(Protocol):
    """A receiver the host can deliver to: scoped paths that fail the first ``fail_first`` attempts per delivery."""

    def exercise(self, fail_first: float) -> str: ...

    def url(self, path: str) -> str: ...

    def close(self, path: str) -> None: ...

    def attempts(self, path: str) -> list[Attempt]: ...


@dataclass
class Session:
    """One certification run's rig."""

    url: str
    key: str
    #: a key of a second tenant (``OPENWOP_TEST_TENANT_B_API_KEY``)
    tenant_b_key: str | None = None
    schemas: Schemas | None = None
    receiver: WebhookReceiver | None = None
    #: certificate and key the effect-retry provider serves TLS with (the receiver's; none: plain HTTP)
    provider_tls: tuple[str, str | None] | None = None
    verify: bool | str = True
    timeout: float = 10.0
    #: how requests reach the host (``None``: the network); tests of the checks themselves pass a fake host
    transport: httpx.BaseTransport | None = None
    _discovery: dict[str, Any] | None = field(default=None, repr=False)

    @contextmanager
    def client(self, key: str | None = None, *, driver: bool = True) -> Iterator[httpx.Client]:
        """An HTTP client on the host: the suite's driver (JSON, major 2, ``key``), or raw (no headers of its own)."""
        headers = {"Accept": "application/json", "OpenWOP-Version": "2.0"} if driver else {}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        with httpx.Client(
            base_url=self.url, headers=headers, timeout=self.timeout, verify=self.verify, transport=self.transport
        ) as client:
            yield client

    def discovery(self) -> dict[str, Any]:
        """The unauthenticated v2 root, read once per run; without it nearly every check is blocked."""
        if self._discovery is None:
            with self.client() as anon:
                answer = anon.get("/.well-known/openwop")
            if answer.status_code != 200:
                raise Blocked(f"v2 discovery answered {answer.status_code}")
            self._discovery = answer.json()
        return self._discovery

    def schemas_errors(self, name: str, document: Any) -> list[str]:
        if self.schemas is None:
            raise Blocked("no official schemas were given (--schemas DIR), so schema legs cannot run")
        return self.schemas.errors(name, document)


def wait_for(probe: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.05) -> T:
    """``probe()``'s first truthy answer, polled until ``timeout``; a ``Failed`` naming ``what`` after it."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise Failed(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)
