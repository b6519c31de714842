"""Deliveries in the console: a push the receiver refused is dead, on screen without its secrets, and redelivered."""

from __future__ import annotations

from backends import Hosts
from console_pages import TIMEOUT_MS, a2a_send, open_run, sign_in
from harness import wait_until
from inproc import InProcessHost
from playwright.sync_api import Page, expect
from receiver import Receiver, egress_to

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
