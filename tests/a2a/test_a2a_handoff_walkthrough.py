"""The two-host walkthrough in ``docs/handoff.md``, run as a newcomer runs it: pasted into a real shell.

The test takes the ``bash`` block under "Two hosts on one machine" exactly as the page
shows it and runs it with ``bash -e -o pipefail``, changing only what the page itself
reads from the environment: ``TMPDIR`` (so its ``mktemp -d`` lands in the test's folder)
and ``A_PORT``/``B_PORT`` (free ports, since A restarts where B pushes to it). Real
``tether serve`` processes, real curl, the real CLI, a real ``kill -9``. Every process
the shell starts shares its session, which the test kills whatever happens.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from handoff_hosts import free_port

DOC = Path(__file__).resolve().parents[2] / "docs" / "handoff.md"


def walkthrough() -> str:
    """The shell block of the page's two-host section, as printed."""
    page = DOC.read_text()
    section = page[page.index("## Two hosts on one machine") :]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found is not None, "the two-host section has a bash block"
    return found.group(1)


def test_the_two_host_walkthrough_runs_as_written(tmp_path: Path) -> None:
    script = walkthrough()
    for variable in ("A_PORT", "B_PORT", "mktemp -d"):
        assert variable in script, f"the walkthrough no longer reads {variable}; the test cannot place it"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # `tether` and `python`, as installed
        "TMPDIR": str(tmp_path),
        "A_PORT": str(free_port()),
        "B_PORT": str(free_port()),
    }
    for name in ("TETHER_URL", "TETHER_API_KEY", "TETHER_DATA_DIR", "SSL_CERT_FILE", "CURL_CA_BUNDLE"):
        env.pop(name, None)
    shell = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        out, err = shell.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        shell.kill()
        out, err = shell.communicate()
        pytest.fail(f"the walkthrough hung:\n{out}\n{err}\n{_logs(tmp_path)}")
    finally:
        try:
            os.killpg(shell.pid, signal.SIGKILL)  # the hosts, if the block stopped before its last line
        except ProcessLookupError:
            pass
    assert shell.returncode == 0, f"the walkthrough failed ({shell.returncode}):\n{out}\n{err}\n{_logs(tmp_path)}"
    summaries = out.split("run:          ")
    assert len(summaries) == 3, out  # two `tether runs get`
    waiting, done = summaries[1], summaries[2]
    assert "status:       waiting-approval" in waiting, out
    assert "waiting on a peer at node 'peer'" in waiting and "A2A 1.0" in waiting, out
    assert "Approve the draft" in waiting, out  # B's question, mirrored on A
    assert re.search(r"accepted run \S+ at node 'peer'", out), out
    assert "status:       completed" in done, out
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir() and p.name.startswith("tmp")]
    assert "resumed 1 unfinished run(s)" in (folder / "a2.log").read_text()  # A really came back to a waiting run


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {log}\n{log.read_text()}" for log in sorted(tmp_path.glob("*/*.log")))
