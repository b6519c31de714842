"""The workflows a host can run: bundled ones, a ``--workflows`` folder, seeded fixtures."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tether.caches import holds_copies
from tether.engine.nodes import SUPPORTED_TYPE_IDS
from tether.engine.validation import executability_problems, load_workflow, load_workflow_file
from tether.engine.workflow import WorkflowDefinition
from tether.errors import NotFound


@dataclass(frozen=True, slots=True)
class Entry:
    workflow: WorkflowDefinition
    source: str  # "bundled", "dir", "fixture"
    problems: tuple[str, ...]

    @property
    def executable(self) -> bool:
        return not self.problems


def bundled_workflows() -> list[WorkflowDefinition]:
    folder = resources.files("tether") / "workflows"
    return [
        load_workflow_file(Path(str(f)))
        for f in sorted(folder.iterdir(), key=lambda f: f.name)
        if f.name.endswith(".json")
    ]


def folder_workflows(folder: Path) -> list[WorkflowDefinition]:
    return [load_workflow_file(f) for f in sorted(folder.glob("*.json"))]


@holds_copies("_entries")
class WorkflowRegistry:
    """The workflows of a host, each with why it cannot run here (``supported``: the node types it runs)."""

    def __init__(self, supported: Collection[str] = SUPPORTED_TYPE_IDS) -> None:
        self._entries: dict[str, Entry] = {}
        self._supported = supported

    def add(self, workflows: Iterable[WorkflowDefinition], source: str) -> None:
        for wf in workflows:
            problems = executability_problems(wf, self._supported)
            problems += [
                f"node {n.id!r} is pinned to an agent, and this host has no agent surface"
                for n in wf.nodes
                if n.agent is not None and not n.disabled
            ]
            self._entries[wf.id] = Entry(wf, source, tuple(problems))

    def add_raw(self, definition: dict[str, object], source: str) -> WorkflowDefinition:
        wf = load_workflow(definition)
        self.add([wf], source)
        return wf

    def get(self, workflow_id: str) -> Entry:
        entry = self._entries.get(workflow_id)
        if entry is None:
            raise NotFound(
                f"no workflow {workflow_id!r} on this host",
                code="workflow_not_found",
                details={"workflowId": workflow_id},
            )
        return entry

    def __contains__(self, workflow_id: object) -> bool:
        return workflow_id in self._entries

    def entries(self) -> list[Entry]:
        return sorted(self._entries.values(), key=lambda e: e.workflow.id)

    def executable_fixtures(self) -> list[str]:
        return [e.workflow.id for e in self.entries() if e.source == "fixture" and e.executable]
