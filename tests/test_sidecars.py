"""The sidecar environments: made once per requirements file, atomically, and refused clearly."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
import sidecars
from sidecars import SidecarUnavailable, env_dir, require_sidecar, sidecar_python


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sidecars, "_FAILED", {})
    return tmp_path / "cache" / "tether" / "envs"


def _requirements(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    return path


def test_an_environment_is_made_once_and_named_by_its_requirements(tmp_path: Path, cache: Path) -> None:
    requirements = _requirements(tmp_path, "# nothing to install\n")
    made: list[Path] = []
    threads = [threading.Thread(target=lambda: made.append(sidecar_python("empty", requirements))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(made) == 2 and made[0] == made[1], "two callers at once share one build"
    python = made[0]
    assert python.parent.parent == env_dir("empty", requirements) and python.parent.parent.parent == cache
    ran = subprocess.run([str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
    assert ran.stdout.strip() == str(python.parent.parent), "the renamed environment is its own prefix"
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [python.parent.parent.name], "no half-built leftovers"
    stamp = (python.parent.parent / ".tether-sidecar").stat().st_mtime_ns
    assert sidecar_python("empty", requirements) == python
    assert (python.parent.parent / ".tether-sidecar").stat().st_mtime_ns == stamp, "cached, not rebuilt"
    requirements.write_text("# changed\n")
    assert env_dir("empty", requirements) != python.parent.parent, "a changed file is another environment"


def test_an_environment_that_cannot_be_made_skips_or_fails_under_ci(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requirements = _requirements(tmp_path, "tether-no-such-package==0.0.0\n")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(SidecarUnavailable, match="tether-no-such-package"):
        sidecar_python("broken", requirements)
    assert [p for p in cache.iterdir() if p.is_dir()] == [], "the failed build left nothing behind"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no broken environment"):
        require_sidecar("broken", requirements)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no broken environment"):
        require_sidecar("broken", requirements)
