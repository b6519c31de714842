"""Workflow definitions written as JSON documents, for the engine's tests: a node, a whole workflow."""

from __future__ import annotations

from typing import Any

Doc = dict[str, Any]


def node(node_id: str, type_id: str = "core.noop", **extra: Any) -> Doc:
    """A node named after its id, at the origin, with no config or inputs unless ``extra`` gives them."""
    return {
        "id": node_id,
        "typeId": type_id,
        "name": node_id,
        "position": {"x": 0, "y": 0},
        "config": {},
        "inputs": {},
        **extra,
    }


def workflow_doc(workflow_id: str, nodes: list[Doc], edges: list[Doc], variables: list[Doc] | None = None) -> Doc:
    """A manually triggered workflow of ``nodes`` and ``edges``, named after its id."""
    return {
        "id": workflow_id,
        "name": workflow_id,
        "version": "1.0.0",
        "nodes": nodes,
        "edges": edges,
        "triggers": [{"id": "manual", "type": "manual"}],
        "variables": variables or [],
        "metadata": {},
        "settings": {},
    }
