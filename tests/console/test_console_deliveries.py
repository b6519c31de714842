"""Deliveries in the console: a push the receiver refused is dead, on screen without its secrets, and redelivered."""

from __future__ import annotations

from pathlib import Path

from backends import Hosts
from click.testing import CliRunner
from console_pages import TIMEOUT_MS, a2a_send, open_run, sign_in
from harness import wait_until
from inproc import InProcessHost
from playwright.sync_api import Page, expect
from receiver import Receiver, egress_to

from tether.cli.main import cli

#: how many lines an element's text takes on screen (the distinct tops of its text's boxes)
LINES = """el => {
  const tops = new Set();
  const texts = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let text = texts.nextNode(); text; text = texts.nextNode()) {
    const range = document.createRange();
    range.selectNodeContents(text);
    for (const box of range.getClientRects()) tops.add(Math.round(box.top));
  }
  return tops.size;
}"""
TOKEN = "tok-console-7a6b5c4d3e2f-raw-token"
CREDENTIALS = "cred-console-0f1e2d3c-raw-credentials"


def test_a_dead_push_is_shown_without_secrets_and_redelivered(
    page: Page, start_host: Hosts[InProcessHost], receiver: Receiver
) -> None:
    host = start_host(*egress_to(receiver))
    key = host.dev_key
    assert key
    receiver.script = [400]  # a 4xx is a refusal: dead at once, no retry ladder
    config = {
        "url": receiver.url("/push?signature=query-secret"),
        "token": TOKEN,
        "authentication": {"schemes": ["Bearer"], "credentials": CREDENTIALS},
    }
    task = a2a_send(host, key, "approval-gated", "Push me", pushNotificationConfig=config)
    http = host.http(key)
    dead = wait_until(
        lambda: http.get("/v1/deliveries", params={"status": "dead"}).json()["deliveries"], what="the dead letter"
    )
    delivery_id = dead[0]["deliveryId"]

    sign_in(page, host, key)
    page.get_by_role("link", name="Deliveries").click()
    row = page.locator(f'tr[data-delivery-id="{delivery_id}"]')
    expect(row).to_have_attribute("data-status", "dead", timeout=TIMEOUT_MS)
    expect(row).to_contain_text(task["id"])
    expect(row).to_contain_text("400")  # the last error says what the receiver answered
    expect(row).to_contain_text(f"https://127.0.0.1:{receiver.port}/push (query hidden)")
    html = page.content()
    for secret in (TOKEN, CREDENTIALS, "query-secret", key):
        assert secret not in html, f"{secret!r} is on the deliveries page"

    receiver.script = [204]
    row.get_by_role("button", name=f"Redeliver {delivery_id}").click()
    expect(row).to_have_attribute("data-status", "delivered", timeout=TIMEOUT_MS)
    expect(row.get_by_role("button")).to_have_count(0)
    assert receiver.requests[-1].headers["x-a2a-notification-token"] == TOKEN  # the real push went out again

    open_run(page, host, task["id"])
    in_run = page.locator(f'#run-deliveries tr[data-delivery-id="{delivery_id}"]')
    expect(in_run).to_have_attribute("data-status", "delivered", timeout=TIMEOUT_MS)
    assert TOKEN not in page.content() and CREDENTIALS not in page.content()


def test_a_retry_reads_as_the_cli_says_it_and_ids_stay_on_one_line(
    page: Page, start_host: Hosts[InProcessHost], receiver: Receiver, screenshots: Path
) -> None:
    """A push the receiver failed (503) waits for its next attempt: ``pending``, in the console as in the CLI."""
    host = start_host(*egress_to(receiver))
    key = host.dev_key
    assert key
    receiver.script = [503]  # a 5xx is retried: pending, with an attempt behind it
    task = a2a_send(host, key, "approval-gated", "Push me later", pushNotificationConfig={"url": receiver.url("/push")})
    http = host.http(key)
    [retry] = wait_until(
        lambda: [d for d in http.get("/v1/deliveries").json()["deliveries"] if d["attempts"] >= 1],
        what="the first failed attempt",
    )
    assert retry["status"] == "pending"
    listed = CliRunner().invoke(cli, ["push", "list", "--url", host.url, "--key", key])
    assert listed.exit_code == 0, listed.output
    [cli_row] = [line for line in listed.stdout.splitlines() if retry["deliveryId"] in line]
    assert " pending " in cli_row

    sign_in(page, host, key)
    page.get_by_role("link", name="Deliveries").click()
    row = page.locator(f'tr[data-delivery-id="{retry["deliveryId"]}"]')
    expect(row).to_have_attribute("data-status", "pending", timeout=TIMEOUT_MS)
    expect(row.locator("td[data-label=Status]")).to_have_text("pending")
    expect(row).to_contain_text("503")
    for width, height in ((1280, 800), (390, 844)):  # a laptop, then a phone (one card per delivery)
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=screenshots / f"deliveries-{width}.png", full_page=True)
        for label, value in (("Delivery", retry["deliveryId"]), ("Run", task["id"])):
            cell = row.locator(f"td[data-label={label}]")
            expect(cell).to_contain_text(value)
            lines = cell.evaluate(LINES)
            assert lines == 1, f"at {width} px the {label.lower()} id wraps over {lines} lines"
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, (
            "the page scrolls sideways"
        )
