"""The official OpenWOP and A2A JSON Schemas, as an oracle outside Tether's own models.

Tests check Tether's output (and its own validation) against the published schemas
rather than against Tether's code, so a shared misunderstanding cannot make both pass.
The schemas are not vendored into the project. ``schemas_manifest.json`` pins each file
(``openwop/``, the ``schemas/`` files of openwop/openwop and openwop/openwop-sdks, with
major 2's under ``openwop/v2/`` in a group of their own, and ``a2a-v0.3.0.json``, the A2A
v0.3 JSON Schema) and each conformance fixture by upstream URL and sha256;
``schemas_source`` finds a verified copy of each group in its ``TETHER_*_DIR``, in
``../shared`` beside the repository, in the user's cache, or downloads one (its docstring
gives the order). ``conftest.py`` fails the session once, before any test runs, when any
group cannot be had.

Validators are built once per name and cached: build them freely in tests. One registry
holds both majors (their ``$id``s differ: ``.../spec/v1/...``, ``.../spec/v2/...``).

    openwop_validator("workflow-definition").validate(doc)
    openwop_validator("run-event-payloads#/$defs/runStarted").validate(payload)
    openwop_validator("v2/run-snapshot").validate(run)
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
    "fixtures_v2_dir",
    "group_dirs",
    "openwop_validator",
    "schemas_dir",
    "unavailable",
]

_REPO_ROOT = Path(__file__).resolve().parents[1]

#: the manifest groups whose ``openwop/`` files make up the OpenWOP registry (major 1, major 2)
_OPENWOP_GROUPS = ("schemas", "schemas-v2")

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


def fixtures_v2_dir() -> Path:
    """The verified fixtures the v2 suite seeds (``conformance-noop``, ``-cancellable``, ``-delay``, ``-approval``,
    ``-failure``), in a folder of their own so tests that seed or list all of ``fixtures_dir()`` see the same set.
    """
    return _folder("fixtures-v2")


def group_dirs() -> dict[str, Path]:
    """Every manifest group's verified folder, by group name."""
    return {name: _folder(name) for name in _resolver().lookup.manifest.groups}


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@functools.cache
def _openwop_files() -> dict[str, Path]:
    """Map each schema file, relative to ``openwop/`` (``v2/x.schema.json``), to its verified copy, over both majors."""
    files: dict[str, Path] = {}
    for group in _OPENWOP_GROUPS:
        folder = _folder(group)
        # the pinned (verified) files only, not whatever else a folder holds (../shared/schemas has a stale v2 file)
        for pinned in sorted(_resolver().lookup.manifest.groups[group].files, key=lambda pinned: pinned.path):
            relative = pinned.path.removeprefix("openwop/")
            if relative == pinned.path:
                continue
            if relative in files:
                raise ValueError(f"openwop/{relative} is pinned in more than one group; which one is meant?")
            files[relative] = folder / pinned.path
    return files


@functools.cache
def _openwop_ids() -> dict[str, str]:
    """Map each schema file, relative to ``openwop/`` (``v2/x.schema.json``), to its ``$id``."""
    ids: dict[str, str] = {}
    for relative, path in _openwop_files().items():
        schema_id = _read_json(path).get("$id")
        if isinstance(schema_id, str):
            ids[relative] = schema_id
    return ids


@functools.cache
def _registry() -> Registry:
    """Every schema under its ``$id`` (and the A2A file under a made-up base URI)."""
    files = _openwop_files()
    resources = [
        (schema_id, Resource.from_contents(_read_json(files[relative]), default_specification=DRAFT202012))
        for relative, schema_id in _openwop_ids().items()
    ]
    a2a = Resource.from_contents(_read_json(schemas_dir() / _A2A_FILE), default_specification=DRAFT7)
    registry: Registry = Registry().with_resources([*resources, (_A2A_URI, a2a)])
    return registry.crawl()


@functools.cache
def openwop_validator(name: str) -> Validator:
    """A 2020-12 validator, formats checked, for one OpenWOP schema or a part of one.

    ``name`` is a file under ``openwop/`` with or without ``.schema.json``
    (``"workflow-definition"``, ``"v2/error-envelope"``, ``"v2/run-snapshot"``), optionally
    followed by a JSON pointer fragment (``"run-event-payloads#/$defs/runStarted"``).
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
