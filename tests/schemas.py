"""The official OpenWOP and A2A JSON Schemas, as an oracle outside Tether's own models.

Tests check Tether's output (and its own validation) against the published schemas
rather than against Tether's code, so a shared misunderstanding cannot make both pass.
The schemas are not vendored into the project. ``schemas_manifest.json`` pins each file
(``openwop/``, the ``schemas/`` files of openwop/openwop and openwop/openwop-sdks, and
``a2a-v0.3.0.json``, the A2A v0.3 JSON Schema) and each conformance fixture by upstream
URL and sha256; ``schemas_source`` finds a verified copy in ``TETHER_SCHEMAS_DIR`` /
``TETHER_FIXTURES_DIR``, in ``../shared`` beside the repository, in the user's cache, or
downloads one (its docstring gives the order). ``conftest.py`` fails the session once,
before any test runs, when none can be had.

Validators are built once per name and cached: build them freely in tests.

    openwop_validator("workflow-definition").validate(doc)
    openwop_validator("run-event-payloads#/$defs/runStarted").validate(payload)
    a2a_validator("Task").validate(task)
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7, DRAFT202012
from schemas_source import Lookup, Manifest, Resolver, SchemasUnavailable

__all__ = [
    "a2a_validator",
    "fixtures_dir",
    "openwop_validator",
    "schemas_dir",
    "unavailable",
]

_REPO_ROOT = Path(__file__).resolve().parents[1]

# The A2A file has no $id; this base lets its internal "#/definitions/..." refs resolve.
_A2A_FILE = "a2a-v0.3.0.json"
_A2A_URI = "https://tether.invalid/schemas/a2a-v0.3.0.json"


@functools.cache
def _resolver() -> Resolver:
    """One resolver per session: each group is looked up (and at most downloaded) once."""
    return Resolver(Lookup.from_environ(os.environ, repo_root=_REPO_ROOT, manifest=Manifest.load()))


def unavailable() -> str | None:
    """Why the oracle cannot be had, or None: what ``conftest.py`` reports once, before any test runs."""
    for group in _resolver().lookup.manifest.groups:
        try:
            _resolver().resolve(group)
        except SchemasUnavailable as exc:
            return str(exc)
    return None


def _folder(group: str) -> Path:
    try:
        return _resolver().resolve(group)
    except SchemasUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def schemas_dir() -> Path:
    """The verified schema folder; fails the test, saying how to provide it, when there is none."""
    return _folder("schemas")


def fixtures_dir() -> Path:
    """The verified OpenWOP conformance fixtures folder (the ``conformance-*.json`` workflows)."""
    return _folder("fixtures")


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@functools.cache
def _openwop_ids() -> dict[str, str]:
    """Map each schema file, relative to ``openwop/`` (``v2/x.schema.json``), to its ``$id``."""
    root = schemas_dir() / "openwop"
    ids: dict[str, str] = {}
    # the pinned (verified) files only, not whatever else a folder holds
    for pinned in sorted(_resolver().lookup.manifest.groups["schemas"].files, key=lambda pinned: pinned.path):
        relative = pinned.path.removeprefix("openwop/")
        if relative == pinned.path:
            continue
        schema_id = _read_json(root / relative).get("$id")
        if isinstance(schema_id, str):
            ids[relative] = schema_id
    return ids


@functools.cache
def _registry() -> Registry:
    """Every schema under its ``$id`` (and the A2A file under a made-up base URI)."""
    root = schemas_dir() / "openwop"
    resources = [
        (schema_id, Resource.from_contents(_read_json(root / relative), default_specification=DRAFT202012))
        for relative, schema_id in _openwop_ids().items()
    ]
    a2a = Resource.from_contents(_read_json(schemas_dir() / _A2A_FILE), default_specification=DRAFT7)
    registry: Registry = Registry().with_resources([*resources, (_A2A_URI, a2a)])
    return registry.crawl()


@functools.cache
def openwop_validator(name: str) -> Validator:
    """A 2020-12 validator, formats checked, for one OpenWOP schema or a part of one.

    ``name`` is a file under ``openwop/`` with or without ``.schema.json``
    (``"workflow-definition"``, ``"v2/error-envelope"``), optionally followed by a JSON
    pointer fragment (``"run-event-payloads#/$defs/runStarted"``).
    """
    file, _, fragment = name.partition("#")
    if not file.endswith(".json"):
        file += ".schema.json"
    ids = _openwop_ids()
    if file not in ids:
        raise KeyError(f"no OpenWOP schema {file!r}; known: {', '.join(sorted(ids))}")
    return Draft202012Validator(
        {"$ref": f"{ids[file]}#{fragment}" if fragment else ids[file]},
        registry=_registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


@functools.cache
def a2a_validator(definition_name: str) -> Validator:
    """A draft-07 validator, formats checked, for ``#/definitions/<definition_name>`` of A2A v0.3."""
    definitions = _read_json(schemas_dir() / _A2A_FILE)["definitions"]
    if definition_name not in definitions:
        raise KeyError(f"A2A v0.3 schema has no definition {definition_name!r}")
    return Draft7Validator(
        {"$ref": f"{_A2A_URI}#/definitions/{definition_name}"},
        registry=_registry(),
        format_checker=Draft7Validator.FORMAT_CHECKER,
    )
