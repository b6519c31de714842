"""The official OpenWOP and A2A JSON Schemas, as an oracle outside Tether's own models.

Tests check Tether's output (and its own validation) against the published schemas
rather than against Tether's code, so a shared misunderstanding cannot make both pass.
The schemas are not vendored into the project: point ``TETHER_SCHEMAS_DIR`` at a folder
holding ``openwop/`` (the ``schemas/`` directory of openwop/openwop) and
``a2a-v0.3.0.json`` (the A2A v0.3 JSON Schema). The default is ``../shared/schemas``
next to the repository. Fixtures come from ``TETHER_FIXTURES_DIR``, by default
``<schemas>/../fixtures/openwop-conformance``.

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

__all__ = [
    "a2a_validator",
    "fixtures_dir",
    "openwop_validator",
    "schemas_dir",
]

_REPO_ROOT = Path(__file__).resolve().parents[1]

# The A2A file has no $id; this base lets its internal "#/definitions/..." refs resolve.
_A2A_FILE = "a2a-v0.3.0.json"
_A2A_URI = "https://tether.invalid/schemas/a2a-v0.3.0.json"


@functools.cache
def schemas_dir() -> Path:
    """The schema folder; fails the test, saying how to provide it, when it is missing."""
    configured = os.environ.get("TETHER_SCHEMAS_DIR")
    path = Path(configured) if configured else _REPO_ROOT.parent / "shared" / "schemas"
    if not (path / "openwop").is_dir() or not (path / _A2A_FILE).is_file():
        pytest.fail(
            f"official schemas not found at {path}: set TETHER_SCHEMAS_DIR to a folder holding "
            f"'openwop/' (a checkout of the OpenWOP schemas, openwop/openwop 'schemas/') "
            f"and '{_A2A_FILE}' (the A2A v0.3 JSON schema)",
            pytrace=False,
        )
    return path


@functools.cache
def fixtures_dir() -> Path:
    """The OpenWOP conformance fixtures folder (``TETHER_FIXTURES_DIR`` or beside the schemas)."""
    configured = os.environ.get("TETHER_FIXTURES_DIR")
    path = Path(configured) if configured else schemas_dir().parent / "fixtures" / "openwop-conformance"
    if not path.is_dir():
        pytest.fail(
            f"OpenWOP conformance fixtures not found at {path}: set TETHER_FIXTURES_DIR to a folder "
            f"of conformance-*.json workflows (openwop/openwop 'conformance/fixtures/')",
            pytrace=False,
        )
    return path


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@functools.cache
def _openwop_ids() -> dict[str, str]:
    """Map each schema file, relative to ``openwop/`` (``v2/x.schema.json``), to its ``$id``."""
    root = schemas_dir() / "openwop"
    ids: dict[str, str] = {}
    for path in sorted(root.rglob("*.json")):
        schema_id = _read_json(path).get("$id")
        if isinstance(schema_id, str):
            ids[path.relative_to(root).as_posix()] = schema_id
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
