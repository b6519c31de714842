"""The harness catches a loss: a build that acknowledges an answer before committing it (a planted bug).

``TETHER_FAULTS_PLANT=ack-before-commit`` (honoured with ``--enable-test-seams`` only) makes
the host answer an interrupt's resolution at once and write it 0.3 s later. Run without a
crash the scenario passes, as a random test would; crashed at each commit, the harness
finds the answer it acknowledged lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from crash import crash, trace
from scenarios import SCENARIOS

pytestmark = [
    pytest.mark.faults,
    pytest.mark.process,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"),
]


def test_the_harness_reports_an_answer_acknowledged_before_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_FAULTS_PLANTED", "ack-before-commit")
    approval = SCENARIOS["approval"]
    reached, violations = trace(approval, tmp_path / "trace", "sqlite", None)
    assert not violations, f"without a crash the planted bug goes unseen: {violations}"
    found: list[str] = []
    commits = reached["a"]["store.commit.before"]
    for nth in range(1, commits + 1):
        _, violations = crash(approval, tmp_path / f"c{nth}", "sqlite", None, "a", "store.commit.before", nth)
        found += violations
    assert found, "the harness crashed the planted build at every commit and reported no violation"
    assert any("completed" in v or "answer" in v for v in found), found
