"""A run waiting on a hand-off's peer: the console shows the peer's question as untrusted text, and answers it.

Two real hosts over HTTPS (``tests/a2a/handoff_hosts.Pair``): A hands a task to B, whose
workflow asks a question written with HTML in it. A mirrors it; the REST snapshot says
what the peer asked (``interrupt.peerQuestion``), and the console shows it as text under
an untrusted-content label, then answers it through the form.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_pages import TIMEOUT_MS, sign_in
from playwright.sync_api import Browser, Page, expect

_A2A = Path(__file__).resolve().parents[1] / "a2a"
if str(_A2A) not in sys.path:
    sys.path.insert(0, str(_A2A))

from handoff_hosts import Doc, Pair, peer_task, start, until_status  # noqa: E402
from inproc import InProcessHost  # noqa: E402
from workflow_docs import node, workflow_doc  # noqa: E402

#: what B asks: markup that would run script and draw an image if it were ever parsed as HTML
QUESTION = 'Which colour? <img src=x onerror="window.__pwned = 1"><b>bold</b> & <script>window.__pwned = 2</script>'


def _b_workflows() -> list[Doc]:
    ask = node("ask", "core.clarificationGate", config={"questions": [{"id": "q1", "question": QUESTION}]})
    return [workflow_doc("html-question", [ask], [])]


def _a_workflows(b_url: str) -> list[Doc]:
    prompt = {"prompt": {"type": "static", "value": "Ask me something"}}
    peer = node("peer", "vendor.tether.a2a-handoff", config={"agent": b_url, "skill": "html-question"}, inputs=prompt)
    return [workflow_doc("hand-html-question", [peer], [])]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    hosts = Pair(tmp_path, _a_workflows, _b_workflows(), kind=InProcessHost)  # neither is killed
    yield hosts
    hosts.close()


@pytest.fixture
def https_page(browser: Browser) -> Iterator[Page]:
    """A page that trusts the pair's test certificates; fails the test on a script error or a CSP refusal."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, ignore_https_errors=True)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    opened.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        yield opened
    finally:
        context.close()
    assert problems == [], problems


def test_the_peers_question_is_shown_as_untrusted_text_and_answered(pair: Pair, https_page: Page) -> None:
    page = https_page
    with pair.a_http() as a:
        run_id = start(a, "hand-html-question", {})
        waiting = until_status(a, run_id, "waiting-input")
        task_id = peer_task(a, run_id)
        asked = waiting["interrupt"]["peerQuestion"]
        assert asked["contentTrust"] == "untrusted"
        assert (asked["agent"], asked["taskId"], asked["peerState"]) == (pair.b_url, task_id, "input-required")
        assert QUESTION in asked["message"], "the peer's status message, as it sent it"

        sign_in(page, pair.a, pair.a_key)
        listed = page.locator(f'tr[data-run-id="{run_id}"]')
        expect(listed).to_contain_text(f"Peer asks: {QUESTION}", timeout=TIMEOUT_MS)  # as text in the list too
        page.goto(f"{pair.a.url}/console#/runs/{run_id}")
        expect(page.locator("#run-status")).to_have_text("waiting-input", timeout=TIMEOUT_MS)
        shown = page.get_by_role("group", name="The peer agent asks")
        expect(shown).to_be_visible()
        expect(page.locator("#peer-question-trust")).to_contain_text("Untrusted peer content")
        expect(page.locator("#peer-question-message")).to_have_text(asked["message"])  # the markup, as text
        expect(shown).to_contain_text(task_id)
        expect(page.locator("#answer img, #answer b, #answer script")).to_have_count(0)
        assert page.evaluate("window.__pwned") is None, "the peer's markup ran"

        page.get_by_label(QUESTION).fill("green")  # the question is the label, as text too
        page.get_by_role("button", name="Send answers").click()
        expect(page.locator("#run-status")).to_have_text("completed", timeout=TIMEOUT_MS)
        expect(page.locator("#peer-question")).to_have_count(0)
        assert until_status(a, run_id, "completed")["status"] == "completed"
    with pair.b_http() as b:
        answers = until_status(b, task_id, "completed")["nodeStates"]["ask"]["outputs"]
    assert "green" in str(answers)
