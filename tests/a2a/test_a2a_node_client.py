"""The Node test helper: installs once per lockfile, atomically, and skips (or, under CI, fails) without Node.

A stand-in ``node`` and ``npm`` on ``PATH`` (shell scripts) play the toolchain, so these
run without the network and without Node itself.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from _pytest.outcomes import Failed, Skipped
from node_client import NodeProject


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\nPATH=/usr/bin:/bin\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def project(tmp_path: Path) -> NodeProject:
    source = tmp_path / "proj"
    source.mkdir()
    (source / "package.json").write_text('{"name": "proj", "private": true}')
    (source / "package-lock.json").write_text('{"lockfileVersion": 3}')
    (source / "hello.mjs").write_text("console.log('{}')")
    return NodeProject(source)


@pytest.fixture
def toolchain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty bin folder as the whole PATH, and a cache of this test's own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CI", raising=False)
    return bin_dir


def test_installs_once_into_a_folder_named_for_the_lockfile(
    project: NodeProject, toolchain: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "npm-calls"
    _tool(toolchain, "node", "echo v20.20.2")
    _tool(toolchain, "npm", f'echo "$@" >> {calls}; mkdir node_modules')
    target = project.install()
    assert target.parent == tmp_path / "cache" / "tether" / "node"
    assert target.name.startswith("proj-") and (target / "node_modules").is_dir()
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name], "no staging folder left behind"
    assert NodeProject(project.source).install() == target
    assert calls.read_text().split() == ["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    script = project.script("hello.mjs")
    assert script.parent == target / "scripts" and script.read_text() == "console.log('{}')"
    (project.source / "package-lock.json").write_text('{"lockfileVersion": 3, "changed": true}')
    assert NodeProject(project.source).install() != target, "a new lockfile is a new install"


def test_a_failed_install_leaves_nothing_and_skips(project: NodeProject, toolchain: Path) -> None:
    _tool(toolchain, "node", "echo v20.20.2")
    _tool(toolchain, "npm", "mkdir node_modules; echo 'E404 no such package' >&2; exit 1")
    with pytest.raises(Skipped, match="E404"):
        project.install()
    assert list(project.target.parent.iterdir()) == []


def test_without_node_it_skips_and_under_ci_it_fails(
    project: NodeProject, toolchain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Skipped, match="node and npm are needed"):
        project.install()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(Failed, match="node and npm are needed"):
        project.install()
    _tool(toolchain, "node", "echo v18.19.0")
    _tool(toolchain, "npm", "exit 0")
    with pytest.raises(Failed, match="needs Node 20 or later, found v18.19.0"):
        project.install()
    assert not os.path.exists(project.target)
