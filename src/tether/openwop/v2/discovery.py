"""The closed v2 discovery root: what this host serves at major 2, each family backed by code and tests.

Presence is the claim: a family appears only when Tether really serves it, with only the
facets it really offers. The records are ``experimental`` (as the v2 declaration rates
every family in scope here but ``limits``), which v2 requires to say ``until`` when.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tether import __version__
from tether.engine.events import EVENT_LOG_ERA
from tether.openwop.surface import RestSurface
from tether.openwop.v2.eventlog import ENGINE_MAJOR
from tether.openwop.v2.runs import PAGE_MAX
from tether.openwop.versions import PREFERRED_VERSION, PROTOCOL_VERSIONS

__all__ = ["SINCE", "family", "v2_root"]

#: the minor this host began serving each family at
SINCE = "2.0"
#: how long an experimental family is promised as it is: through the next minor
UNTIL = "2.1"

#: more families, added by the pieces that back them (webhooks, A2A...): name -> record maker
Family = Callable[[RestSurface], Mapping[str, Any] | None]


def family(witness: str, *, stable: bool = False, **facets: Any) -> dict[str, Any]:
    """A capability record: ``{status, since, until?, witness, ...facets}``."""
    record: dict[str, Any] = {"status": "stable" if stable else "experimental", "since": SINCE}
    if not stable:
        record["until"] = UNTIL
    record["witness"] = witness
    record.update(facets)
    return record


def v2_root(rest: RestSurface, more: Mapping[str, Family] | None = None) -> dict[str, Any]:
    """The discovery document at major 2 (``capabilities.schema.json``: closed, records for families)."""
    settings = rest.settings
    root: dict[str, Any] = {
        "protocolVersion": PREFERRED_VERSION,
        "protocolVersions": list(PROTOCOL_VERSIONS),
        "preferredVersion": PREFERRED_VERSION,
        "implementation": {"name": "tether", "version": __version__, "vendor": "tether"},
        "engineVersion": ENGINE_MAJOR,
        "eventLogSchemaVersion": EVENT_LOG_ERA,
        "fixtures": rest.registry.executable_fixtures(),
        "interrupt": family("witnessable-gated", tokenAlgs=["hs256"]),
        "idempotency": family("witnessable-gated"),
        "eventLog": family("claims-check"),
        "runList": family("witnessable-gated", maxPageSize=PAGE_MAX, filters=["workflowId", "status"]),
        "limits": family(
            "witnessable-gated",
            stable=True,
            clarificationRounds=3,
            schemaRounds=2,
            envelopesPerTurn=5,
            maxRequestBodyBytes=settings.max_body_bytes,
        ),
    }
    for name, make in (more or {}).items():
        record = make(rest)
        if record is not None:
            root[name] = record
    return root
