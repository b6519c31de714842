"""Both OpenWOP majors in one oracle: v1 and v2 schemas by name, every ``$ref`` resolving, the v2 fixtures.

The v2 schemas are a manifest group of their own (``../shared`` has only v1's), so
``schemas.py`` builds its ``$id`` index and registry over two folders. These tests read the
real pinned files, wherever this session found them, and check what the v2 tests lean on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemas
from schemas import fixtures_dir, fixtures_v2_dir, openwop_validator

V1 = "https://openwop.dev/spec/v1/"
V2 = "https://openwop.dev/spec/v2/"


@pytest.mark.parametrize(
    ("name", "ref"),
    [
        ("run-snapshot", f"{V1}run-snapshot.schema.json"),
        ("run-event-payloads#/$defs/runStarted", f"{V1}run-event-payloads.schema.json#/$defs/runStarted"),
        ("v2/run-snapshot", f"{V2}run-snapshot.schema.json"),
        ("v2/capabilities", f"{V2}capabilities.schema.json"),
        ("v2/run-event-payloads#/$defs/runStarted", f"{V2}run-event-payloads.schema.json#/$defs/runStarted"),
        ("v2/error-envelope", f"{V2}error-envelope.schema.json"),
    ],
)
def test_a_name_picks_its_major(name: str, ref: str) -> None:
    validator = openwop_validator(name)
    assert validator.schema == {"$ref": ref}
    # resolving the reference is what fails when a file is missing from the registry
    assert validator.is_valid(None) is False


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_ref_of_every_pinned_schema_resolves() -> None:
    """The v2 files refer to each other (``ids.schema.json#/$defs/runId``): a file left out of the pins shows here."""
    # the helper's own index and registry: this checks them, so it may read them
    files, ids, registry = schemas._openwop_files(), schemas._openwop_ids(), schemas._registry()
    assert sum(relative.startswith("v2/") for relative in ids) == 25
    resolved = 0
    for relative, schema_id in ids.items():
        resolver = registry.resolver(base_uri=schema_id)
        for ref in _refs(json.loads(files[relative].read_text(encoding="utf-8"))):
            resolver.lookup(ref)
            resolved += 1
    assert resolved > 500


def test_the_v2_error_envelope_knows_the_codes_tether_answers() -> None:
    """../shared's older copy lacks ``run_state_conflict`` and ``payload_unprojectable``; the pinned one has them."""
    envelope = openwop_validator("v2/error-envelope")
    envelope.validate({"error": "run_state_conflict", "message": "paused", "details": {"runStatus": "paused"}})
    envelope.validate({"error": "payload_unprojectable", "message": "no v1 form"})
    envelope.validate({"error": "run_terminal", "message": "done"})
    assert not envelope.is_valid({"error": "no_such_code", "message": "x"})


def test_the_v2_fixtures_are_the_suites_five_valid_workflows() -> None:
    workflow = openwop_validator("workflow-definition")
    found = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in fixtures_v2_dir().glob("*.json")}

    assert sorted(found) == [
        f"conformance-{name}.json" for name in ("approval", "cancellable", "delay", "failure", "noop")
    ]
    for name, doc in found.items():
        assert f"{doc['id']}.json" == name
        workflow.validate(doc)
    # a folder of their own: tests that seed every v1 fixture see the same ten as before
    assert not set(found) & {path.name for path in fixtures_dir().glob("*.json")}
