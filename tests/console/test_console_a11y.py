"""The console for people who use a keyboard or a screen reader: roles, names and labels, checked in Chromium.

Playwright's ARIA snapshots are what assistive technology is given; the assertions name
the roles and labels an operator relies on. Every form control must have a label and every
button a name, on each main page.
"""

from __future__ import annotations

from console_pages import TIMEOUT_MS, a2a_send, open_run
from inproc import InProcessHost
from playwright.sync_api import Page, expect

UNLABELLED = """() => [...document.querySelectorAll("input, select, textarea, button")]
    .filter((el) => el.offsetParent !== null || el.closest("dialog[open]"))
    .filter((el) => el.labels?.length === 0 && !el.getAttribute("aria-label") && !el.textContent.trim())
    .map((el) => el.outerHTML)"""


def test_sign_in_works_from_the_keyboard_alone(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    page.goto(f"{host.url}/console")
    snapshot = page.get_by_role("main").aria_snapshot()
    assert '- heading "Sign in" [level=1]' in snapshot
    assert '- textbox "API key"' in snapshot and '- button "Sign in"' in snapshot
    expect(page.get_by_label("API key")).to_be_focused()  # the page starts where the person must type
    page.keyboard.type(host.dev_key)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Runs", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
    assert page.evaluate(UNLABELLED) == []


def test_the_main_pages_name_their_parts(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    task = a2a_send(host, host.dev_key, "approval-gated", "Accessible draft")
    page.goto(f"{host.url}/console")
    page.get_by_label("API key").fill(host.dev_key)
    page.get_by_label("API key").press("Enter")
    expect(page.locator(f'tr[data-run-id="{task["id"]}"]')).to_be_visible(timeout=TIMEOUT_MS)

    banner = page.get_by_role("banner").aria_snapshot()
    assert '- navigation "Console"' in banner and '- link "Runs"' in banner and '- button "Sign out"' in banner
    runs = page.get_by_role("main").aria_snapshot()
    for part in ('- heading "Runs" [level=1]', '- combobox "Status"', '- combobox "Workflow"', '- search "Find a run"'):
        assert part in runs, f"{part} missing from:\n{runs}"
    assert '- searchbox "Run or task id"' in runs
    assert '- table "Runs, newest first"' in runs and '- columnheader "Waiting for"' in runs
    assert page.evaluate(UNLABELLED) == []

    # keyboard: from the run's link, Enter opens it
    page.get_by_role("link", name=task["id"]).focus()
    page.keyboard.press("Enter")
    expect(page.locator("#run-status")).to_have_text("waiting-approval", timeout=TIMEOUT_MS)
    run = page.get_by_role("main").aria_snapshot()
    for part in (
        'region "Decision needed: Approve the draft"',  # quoted in the YAML (it holds a colon)
        '- textbox "Feedback, comment or question"',
        '- group "Decision"',
        '- button "Accept"',
        '- button "Copy task id"',
        '- region "Timeline"',
        '- table "Events of the run, in order"',
        '- region "Nodes"',
    ):
        assert part in run, f"{part} missing from:\n{run}"
    assert page.evaluate(UNLABELLED) == []

    # focus and Enter on the button as it is when pressed: the page refreshes itself live, and a
    # separate focus() then keyboard.press() could land between a re-render's two halves (seen once under load)
    page.get_by_role("button", name="Cancel run…").press("Enter")
    dialog = page.get_by_role("dialog", name="Cancel this run?")
    expect(dialog).to_be_visible()
    assert page.evaluate(UNLABELLED) == []
    page.keyboard.press("Escape")  # a native modal dialog closes from the keyboard
    expect(dialog).to_be_hidden()

    open_run(page, host, task["id"])
    page.get_by_role("link", name="Deliveries").click()
    # the view changes on the hash change, after the click returns: read it once it is there
    expect(page.get_by_role("heading", name="Deliveries", level=1)).to_be_visible(timeout=TIMEOUT_MS)
    deliveries = page.get_by_role("main").aria_snapshot()
    assert '- heading "Deliveries" [level=1]' in deliveries and '- combobox "Status"' in deliveries
