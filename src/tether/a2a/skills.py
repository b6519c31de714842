"""Which workflows are A2A skills, and which one a message asks for.

The card lists exactly :func:`served_skills` and routing accepts exactly those, so a
skill on the card always runs and a workflow off the card is never reachable over A2A.
"""

from __future__ import annotations

from typing import Any

from tether.a2a.errors import InvalidParams, clip, quote
from tether.engine.registry import Entry, WorkflowRegistry

__all__ = ["INPUT_MODES", "OUTPUT_MODES", "SKILL_SOURCES", "resolve_skill", "served_skills"]

#: text parts become ``inputs.prompt``; data parts merge into the inputs; a file of any media type is
#: kept (its bytes as a blob, or its URI) and reaches the workflow in ``inputs.message``
INPUT_MODES = ("text/plain", "application/json", "*/*")
#: every skill answers with a data part of its outputs (and text when that is one string)
OUTPUT_MODES = ("text/plain", "application/json")

#: bundled workflows and those loaded with ``--workflows`` (seeded fixtures are not skills)
SKILL_SOURCES = frozenset({"bundled", "dir"})


def served_skills(registry: WorkflowRegistry, only: tuple[str, ...] = ()) -> list[Entry]:
    """The workflows advertised (and routable) as skills: loaded, runnable, not fixtures.

    ``only`` (``--a2a-skill``): exactly those workflows, whatever their source, so a seeded
    fixture can be the one skill an agent routes (the OpenWOP v2 A2A scenarios need
    ``conformance-approval`` alone: an A2A 1.0 message has no skill selector).
    """
    if only:
        return [e for e in registry.entries() if e.workflow.id in only and e.executable]
    return [e for e in registry.entries() if e.source in SKILL_SOURCES and e.executable]


def resolve_skill(
    registry: WorkflowRegistry, default_skill: str, *metadata: dict[str, Any] | None, only: tuple[str, ...] = ()
) -> str:
    """The workflow id a message runs: the first ``skillId`` in ``metadata``, else the default.

    Parameters
    ----------
    registry:
        The loaded workflows.
    default_skill:
        ``--default-skill``, used when no metadata names a skill.
    metadata:
        ``message.metadata`` then ``params.metadata`` (either may be None).
    only:
        ``--a2a-skill``: the only workflows that are skills, when given.

    Raises
    ------
    InvalidParams
        When the named (or default) skill is not one this agent serves.
    """
    requested: Any = None
    where = "the host's default skill"
    for name, meta in zip(("params.message.metadata.skillId", "params.metadata.skillId"), metadata):
        if meta is not None and "skillId" in meta:
            requested = meta["skillId"]
            where = name
            break
    if requested is None:
        requested = default_skill
    if not isinstance(requested, str) or not requested:
        raise InvalidParams(f"{where} must be a non-empty string naming a skill")
    skills = [e.workflow.id for e in served_skills(registry, only)]
    if requested not in skills:
        raise InvalidParams(
            f"{where} {quote(requested)} is not a skill of this agent; its skills are {', '.join(skills) or '(none)'}",
            data={"skillId": clip(requested), "skills": skills},
        )
    return requested
