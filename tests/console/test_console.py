"""The operator console in real Chromium: sign in, watch a run arrive and wait, answer it, watch it end.

Every step goes through the page the way a person would (labels, roles, buttons), against
a real host on a loopback port; tasks arrive over A2A from outside the browser.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from pathlib import Path
from urllib.parse import urlparse

import httpx
from console_pages import TIMEOUT_MS, a2a_send, open_run, sign_in
from inproc import InProcessHost
from keys import made_key
from playwright.sync_api import Browser, Page, expect

PHONE = {"width": 390, "height": 844}


def _row(page: Page, run_id: str):  # noqa: ANN202 - a Playwright locator
    return page.locator(f'tr[data-run-id="{run_id}"]')


def test_a_waiting_run_appears_live_is_approved_and_completes_without_a_reload(
    page: Page, host: InProcessHost, screenshots: Path
) -> None:
    assert host.dev_key
    sign_in(page, host, host.dev_key)
    page.evaluate("window.__sameDocument = true")  # gone if anything reloads the page
    expect(page.locator("#runs-updated")).to_have_attribute("data-live", "true", timeout=TIMEOUT_MS)
    expect(page.locator("#runs-updated")).to_contain_text("Live")
    lists: list[str] = []  # every read of the runs list from now on
    page.on("request", lambda request: lists.append(request.url) if urlparse(request.url).path == "/v1/runs" else None)

    task = a2a_send(host, host.dev_key, "approval-gated", "Publish the Q3 report")
    assert task["status"]["state"] == "input-required"
    row = _row(page, task["id"])
    expect(row).to_be_visible(timeout=TIMEOUT_MS)  # arrives with no reload
    assert lists == [], "the row came from a re-read of the list, not from the live feed (/v1/runs:watch)"
    expect(row).to_contain_text("waiting-approval")
    expect(row).to_contain_text("approval-gated")
    expect(row).to_contain_text("Approval: Approve the draft")
    expect(row.locator("time")).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\dT"))
    page.screenshot(path=screenshots / "runs-laptop.png", full_page=True)

    row.get_by_role("link", name=task["id"]).click()
    expect(page.locator("#run-status")).to_have_text("waiting-approval", timeout=TIMEOUT_MS)
    expect(page.locator("#task-state")).to_have_text("input-required")
    expect(page.get_by_role("heading", name="Decision needed: Approve the draft")).to_be_visible()
    expect(page.locator("#answer-description")).to_have_text(
        "Accept to publish the draft; reject to route it to on-reject"
    )
    decision = page.get_by_role("group", name="Decision")
    labels = ["Accept", "Reject", "Refine with feedback", "Accept with edits", "Ask a question"]
    expect(decision.get_by_role("button")).to_have_text(labels)
    edited = page.get_by_label("Edited data (JSON), for Accept with edits")
    expect(edited).to_have_value(re.compile(r'"payload": "Publish the Q3 report"'))
    expect(page.locator("#timeline tr[data-sequence]").last).to_contain_text("approval.requested", timeout=TIMEOUT_MS)
    expect(page.locator('#nodes tr[data-node-id="gate"]')).to_contain_text("suspended")
    expect(page.locator('#nodes tr[data-node-id="publish"]')).to_contain_text("not reached")
    page.screenshot(path=screenshots / "waiting-run-laptop.png", full_page=True)

    decision.get_by_role("button", name="Accept", exact=True).click()
    expect(page.locator("#run-status")).to_have_text("completed", timeout=TIMEOUT_MS)
    expect(page.locator("#task-state")).to_have_text("completed", timeout=TIMEOUT_MS)
    expect(page.get_by_role("group", name="Decision")).to_have_count(0)
    expect(page.locator("#timeline")).to_contain_text("run.completed")
    received = page.locator("#timeline tr", has_text="approval.received")
    expect(received).to_contain_text("accept by key:dev")  # the signed-in key decided
    expect(page.locator('#nodes tr[data-node-id="publish"]')).to_contain_text("completed")
    expect(page.locator("#live-state")).to_have_text("The run has ended; its event log is complete.")
    assert page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    snapshot = host.http(host.dev_key).get(f"/v1/runs/{task['id']}").json()
    assert snapshot["status"] == "completed"
    assert snapshot["nodeStates"]["gate"]["outputs"]["decidedBy"] == "key:dev"


def test_a_run_answered_elsewhere_changes_its_row_from_the_feed(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    task = a2a_send(host, host.dev_key, "approval-gated", "Answered from the terminal")
    sign_in(page, host, host.dev_key)
    row = _row(page, task["id"])
    expect(row).to_contain_text("waiting-approval", timeout=TIMEOUT_MS)
    expect(page.locator("#runs-updated")).to_have_attribute("data-live", "true", timeout=TIMEOUT_MS)
    lists: list[str] = []
    page.on("request", lambda request: lists.append(request.url) if urlparse(request.url).path == "/v1/runs" else None)
    answered = host.http(host.dev_key).post(
        f"/v1/runs/{task['id']}/interrupts/gate", json={"resumeValue": {"action": "accept"}}
    )
    assert answered.status_code == 200, answered.text
    expect(row).to_contain_text("completed", timeout=TIMEOUT_MS)
    expect(row).not_to_contain_text("Approval:")
    assert lists == [], "the row changed through a re-read of the list, not the live feed"


def test_phone_width_shows_the_list_and_a_waiting_run_in_one_column(
    browser: Browser, host: InProcessHost, screenshots: Path
) -> None:
    assert host.dev_key
    task = a2a_send(host, host.dev_key, "approval-gated", "Phone-sized draft")
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        sign_in(page, host, host.dev_key)
        expect(_row(page, task["id"])).to_be_visible(timeout=TIMEOUT_MS)
        overflow = "document.documentElement.scrollWidth - window.innerWidth"
        assert page.evaluate(overflow) <= 0, "the runs list scrolls sideways on a phone"
        page.screenshot(path=screenshots / "runs-phone.png", full_page=True)
        open_run(page, host, task["id"])
        expect(page.get_by_role("button", name="Accept", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
        assert page.evaluate(overflow) <= 0, "the run page scrolls sideways on a phone"
        page.screenshot(path=screenshots / "waiting-run-phone.png", full_page=True)
        page.get_by_role("region", name="Decision needed: Approve the draft").screenshot(
            path=screenshots / "waiting-run-phone-decision.png"
        )
    finally:
        context.close()


def test_the_inputs_panel_shows_what_the_run_was_started_with_and_nothing_its_nodes_wrote(
    page: Page, host: InProcessHost
) -> None:
    assert host.dev_key
    task = a2a_send(host, host.dev_key, "approval-gated", "Publish the Q3 report")
    http = host.http(host.dev_key)
    accepted = http.post(f"/v1/runs/{task['id']}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
    assert accepted.status_code == 200, accepted.text
    snapshot = http.get(f"/v1/runs/{task['id']}").json()
    # the message itself is an input too (issue 26): a workflow may route on it
    assert snapshot["inputs"]["prompt"] == "Publish the Q3 report" and set(snapshot["inputs"]) == {"prompt", "message"}
    assert {"payload", "action", "decidedBy"} <= set(snapshot["variables"]), "the nodes wrote beside the inputs"
    sign_in(page, host, host.dev_key)
    open_run(page, host, task["id"])
    expect(page.locator("#run-status")).to_have_text("completed", timeout=TIMEOUT_MS)
    shown = page.get_by_role("region", name="Inputs").get_by_label("Inputs")
    expect(shown).to_have_text(json.dumps(snapshot["inputs"], indent=2))


def test_a_clarification_is_answered_in_a_form(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    task = a2a_send(host, host.dev_key, "clarification-gated", "pick a color")
    sign_in(page, host, host.dev_key)
    open_run(page, host, task["id"])
    expect(page.locator("#run-status")).to_have_text("waiting-input", timeout=TIMEOUT_MS)
    page.get_by_label("What is your favorite color?").fill("teal")
    page.get_by_role("button", name="Send answers").click()
    expect(page.locator("#run-status")).to_have_text("completed", timeout=TIMEOUT_MS)
    expect(page.get_by_role("region", name="Outputs")).to_contain_text('"color": "teal"')
    expect(page.locator("#timeline tr", has_text="clarification.resolved")).to_contain_text("key:dev")


def test_refine_needs_feedback_and_cancel_asks_first(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    task = a2a_send(host, host.dev_key, "approval-gated", "Draft to cancel")
    sign_in(page, host, host.dev_key)
    open_run(page, host, task["id"])
    page.get_by_role("button", name="Refine with feedback").click()
    expect(page.locator("#answer-error")).to_have_text("Write the feedback to refine with first.")
    expect(page.locator("#run-status")).to_have_text("waiting-approval")

    page.get_by_role("button", name="Cancel run…").click()
    dialog = page.get_by_role("dialog", name="Cancel this run?")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Keep it running").click()
    expect(dialog).to_be_hidden()
    assert host.http(host.dev_key).get(f"/v1/runs/{task['id']}").json()["status"] == "waiting-approval"

    page.get_by_role("button", name="Cancel run…").click()
    dialog.get_by_label("Reason (optional)").fill("not needed after all")
    dialog.get_by_role("button", name="Yes, cancel the run").click()
    expect(page.locator("#run-status")).to_have_text("cancelled", timeout=TIMEOUT_MS)
    expect(page.locator("#task-state")).to_have_text("canceled", timeout=TIMEOUT_MS)
    expect(page.get_by_role("button", name="Cancel run…")).to_have_count(0)


def test_a_read_only_key_sees_no_buttons(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    reader = made_key(host, "reader", "--scopes", "runs:read")
    task = a2a_send(host, host.dev_key, "approval-gated", "Read but do not touch")
    sign_in(page, host, reader)
    expect(page.locator("#who-text")).to_have_text("Signed in: read-only")
    expect(page.get_by_role("link", name="Deliveries")).to_be_hidden()
    expect(_row(page, task["id"])).to_be_visible(timeout=TIMEOUT_MS)
    open_run(page, host, task["id"])
    expect(page.get_by_role("heading", name="Decision needed: Approve the draft")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#answer-read-only")).to_contain_text("approvals:respond")
    main = page.get_by_role("main")
    for name in ("Accept", "Reject", "Refine with feedback", "Accept with edits", "Ask a question", "Cancel run…"):
        expect(main.get_by_role("button", name=name, exact=True)).to_have_count(0)
    expect(main.get_by_role("button", name="Redeliver")).to_have_count(0)


def test_another_tenants_run_is_not_found(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    task = a2a_send(host, host.dev_key, "approval-gated", "Default tenant's draft")
    acme = made_key(host, "acme-operator", "--tenant", "acme")
    sign_in(page, host, acme)
    expect(page.locator("#runs-state")).to_contain_text("No runs yet", timeout=TIMEOUT_MS)
    expect(_row(page, task["id"])).to_have_count(0)
    page.get_by_label("Run or task id").fill(task["id"])
    page.get_by_role("button", name="Open").click()
    expect(page.locator("#find-error")).to_have_text(f"No run or task {task['id']} in your tenant.")
    page.goto(f"{host.url}/console#/runs/{task['id']}")
    expect(page.get_by_role("heading", name="Run not found")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_role("button", name="Accept", exact=True)).to_have_count(0)


def test_the_sign_in_page_offers_no_sign_out(page: Page, host: InProcessHost) -> None:
    page.goto(f"{host.url}/console")
    expect(page.get_by_label("API key")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    expect(page.locator("#who")).to_be_hidden()
    assert page.evaluate("getComputedStyle(document.getElementById('who')).display") == "none"


def test_sign_out_forgets_the_key(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    sign_in(page, host, host.dev_key)
    assert page.evaluate("sessionStorage.length") == 1
    assert host.dev_key not in page.url
    assert page.context.cookies() == [] and page.evaluate("document.cookie") == ""
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.get_by_role("navigation", name="Console")).to_be_hidden()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    page.reload()
    expect(page.get_by_label("API key")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_label("API key")).to_have_value("")


def test_a_wrong_key_is_refused_with_a_reason(page: Page, host: InProcessHost) -> None:
    page.goto(f"{host.url}/console")
    page.get_by_label("API key").fill("tk_0000000000000000_" + "0" * 64)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#sign-in-error")).to_contain_text("That key was refused: unknown API key")
    assert page.evaluate("sessionStorage.length") == 0


def test_the_page_is_locked_down_by_its_headers(host: InProcessHost) -> None:
    with httpx.Client(base_url=host.url) as http:
        for path in ("/console", "/console/static/app.js", "/console/static/console.css"):
            answer = http.get(path)
            assert answer.status_code == 200, path
            policy = answer.headers["content-security-policy"]
            assert "script-src 'self';" in policy and "style-src 'self';" in policy
            assert "default-src 'none'" in policy and "connect-src 'self'" in policy
            assert "frame-ancestors 'none'" in policy and "unsafe" not in policy
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["referrer-policy"] == "no-referrer"
        assert http.get("/console").headers["cache-control"] == "no-store"
        assert http.get("/console/static/app.js").headers["content-type"].startswith("text/javascript")
        assert http.get("/console/static/routes.py").status_code == 404
        assert http.get("/console/static/..%2Froutes.py").status_code == 404
        html = http.get("/console").text
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all('src="/console/static/' in attrs and body.strip() == "" for attrs, body in scripts)
    assert "style=" not in html and "<style" not in html


def test_the_console_fetches_nothing_from_elsewhere_and_shows_no_secret(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    task = a2a_send(host, host.dev_key, "approval-gated", "Look for secrets")
    token = host.http(host.dev_key).get(f"/v1/runs/{task['id']}").json()["interrupt"]["interruptToken"]
    sign_in(page, host, host.dev_key)
    shown: list[str] = [page.content()]
    open_run(page, host, task["id"])
    expect(page.get_by_role("group", name="Decision")).to_be_visible(timeout=TIMEOUT_MS)
    shown.append(page.content())
    page.get_by_role("link", name="Deliveries").click()
    expect(page.get_by_role("heading", name="Deliveries")).to_be_visible()
    shown.append(page.content())
    for html in shown:
        assert host.dev_key not in html
        assert host.dev_key.split("_")[2] not in html
        assert "interruptToken" not in html and token.split(".")[1] not in html
        assert "eyJydW5JZCI6" not in html, 'an interrupt token (base64 of {"runId":) is on the page'
    assert requested and all(url.startswith(host.url + "/") for url in requested), requested
    assert not any(host.dev_key in url for url in requested)


def test_files_show_by_name_type_and_size_and_download_byte_for_byte(page: Page, host: InProcessHost) -> None:
    assert host.dev_key
    data = bytes(range(256)) * 4099  # about 1 MiB, every byte value
    sent = {"bytes": base64.b64encode(data).decode(), "name": "q3.bin", "mimeType": "application/x-q3"}
    linked = {"uri": "https://files.example.com/signed.pdf?token=secret", "name": "signed.pdf"}
    message = {
        "kind": "message",
        "role": "user",
        "messageId": f"m-{uuid.uuid4().hex}",
        "parts": [{"kind": "text", "text": "the report"}, *({"kind": "file", "file": f} for f in (sent, linked))],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    task = host.http(host.dev_key).post("/v1/a2a", json=body).json()["result"]
    assert task["status"]["state"] == "completed", task
    sign_in(page, host, host.dev_key)
    open_run(page, host, task["id"])
    artifacts = page.locator("#artifacts")
    expect(artifacts.locator(".file").first).to_contain_text("q3.bin — application/x-q3, 1.0 MiB", timeout=TIMEOUT_MS)
    expect(artifacts.locator(".file").nth(1)).to_contain_text("https://files.example.com/signed.pdf (query hidden)")
    expect(artifacts).not_to_contain_text("secret")
    for where in (artifacts, page.locator("#input-files")):
        with page.expect_download() as downloading:
            where.get_by_role("button", name="Download q3.bin").click()
        saved = downloading.value
        assert saved.suggested_filename == "q3.bin"
        assert hashlib.sha256(Path(saved.path()).read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
