"""A fresh clone, with no ``../shared`` beside it, passes its own tests by downloading the pinned schemas.

The clone is of this repository's committed HEAD (uncommitted changes are not in it, as
they would not be for a newcomer), in a temporary folder whose parent holds no ``shared``.
HOME and XDG_CACHE_HOME point into tmp and every ``TETHER_*`` variable is dropped, so
neither ``/work/shared``-style folders nor a developer's cache can be found; the only
source left is the download, which ``TETHER_SCHEMAS_BASE_URL`` sends to a local mirror
serving the manifest's files.

The README's command is ``pip install -e '.[test]' && pytest``. The install is skipped: it
needs the package index (these tests must not need the internet) and a minute of time.
The inner pytest runs with this venv's interpreter, which already has every dependency,
and ``PYTHONPATH`` set to the clone's ``src`` (it comes before the editable install's
path entry, which this test checks), so the clone's code, tests, conftest and manifest
are what run: exactly what an install of the clone would put first on the path.

Only two fast modules run inside (they use the schemas and the fixtures, and start no
host; the session's check before them resolves every manifest group, v2 included, so every
pinned file is downloaded), so this takes seconds; the inner run never includes this file,
and the guard variable makes it skip should that change.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mirror import Mirror, manifest_files, url_path
from schemas import group_dirs
from schemas_source import Manifest

REPO = Path(__file__).resolve().parents[2]
INNER_TESTS = ["tests/engine/test_workflow.py", "tests/a2a/test_a2a_projection.py"]
GUARD = "TETHER_FRESH_CLONE_INNER"
INNER_TIMEOUT_SECONDS = 120

pytestmark = pytest.mark.skipif(bool(os.environ.get(GUARD)), reason="already inside a fresh-clone run")


def _git(*args: str, cwd: Path) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
    return result.stdout.strip()


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of HEAD, checked out at exactly that commit, with nothing beside it."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: there is no committed HEAD to clone")
    head = _git("rev-parse", "HEAD", cwd=REPO)
    destination = tmp_path_factory.mktemp("fresh") / "tether"
    _git("clone", "--quiet", str(REPO), str(destination), cwd=REPO)
    _git("checkout", "--quiet", "--detach", head, cwd=destination)
    assert not (destination.parent / "shared").exists()
    return destination


@pytest.fixture
def pinned_files() -> dict[str, bytes]:
    """The manifest's files as this session verified them, by the path the mirror serves each at."""
    return manifest_files(Manifest.load(), group_dirs())


@pytest.fixture
def mirror(pinned_files: dict[str, bytes]) -> Iterator[Mirror]:
    with Mirror(pinned_files) as running:
        yield running


def _environ(clone: Path, home: Path, mirror: Mirror) -> dict[str, str]:
    """A newcomer's environment: no TETHER_* settings, an empty HOME and cache, the mirror as download base."""
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("TETHER_") and name not in {"PYTHONPATH", "XDG_CACHE_HOME", "PYTEST_ADDOPTS"}
    }
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    environ.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        PYTHONPATH=str(clone / "src"),
        TETHER_SCHEMAS_BASE_URL=mirror.base_url,
        NO_PROXY=no_proxy,
        no_proxy=no_proxy,
        **{GUARD: "1"},
    )
    return environ


def _run_tests(clone: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # one session, no xdist workers: the tests count what that session downloads
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *INNER_TESTS]
    return subprocess.run(
        command, cwd=clone, env=environ, capture_output=True, text=True, timeout=INNER_TIMEOUT_SECONDS, check=False
    )


def _cache_root(home: Path) -> Path:
    return home / ".cache" / "tether" / "schemas"


def test_the_clone_imports_its_own_code(clone: Path, tmp_path: Path, mirror: Mirror) -> None:
    """Without this, the inner run could be testing this worktree's ``src`` through the editable install."""
    probe = "import tether, sys; print(tether.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=clone,
        env=_environ(clone, tmp_path, mirror),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(result.stdout.strip()).resolve().is_relative_to((clone / "src").resolve())


def test_a_fresh_clone_downloads_the_pinned_files_and_passes(clone: Path, tmp_path: Path, mirror: Mirror) -> None:
    home = tmp_path / "home"
    result = _run_tests(clone, _environ(clone, home, mirror))

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert " passed" in result.stdout and "failed" not in result.stdout
    # every pinned file came from the mirror, once: nothing was found anywhere else
    assert sorted(mirror.served()) == sorted(mirror.files)
    digest = Manifest.load(clone / "tests" / "schemas_manifest.json").digest
    assert [path.name for path in _cache_root(home).iterdir()] == [digest]


def test_a_corrupted_download_fails_once_with_the_hash_message(clone: Path, tmp_path: Path, mirror: Mirror) -> None:
    manifest = Manifest.load(clone / "tests" / "schemas_manifest.json")
    pinned = next(
        item for item in manifest.groups["schemas"].files if item.path == "openwop/workflow-definition.schema.json"
    )
    corrupted = mirror.corrupt(url_path(manifest, pinned))
    home = tmp_path / "home"
    result = _run_tests(clone, _environ(clone, home, mirror))

    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    expected = (
        f"sha256 mismatch for schemas/{pinned.path} downloaded from {mirror.base_url}"
        f"{pinned.url.removeprefix(manifest.base_url)}: expected {pinned.sha256}, "
        f"got {hashlib.sha256(corrupted).hexdigest()}"
    )
    assert expected in output
    assert output.count("sha256 mismatch") == 1, output
    assert f"files pinned in {clone.resolve() / 'tests' / 'schemas_manifest.json'}" in output
    assert " passed" not in result.stdout
    # nothing half-downloaded is left to be trusted next time
    assert not _cache_root(home).exists() or list(_cache_root(home).iterdir()) == []
