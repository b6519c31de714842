"""``callbackUrl``: a run created with one is announced there each time it suspends.

The announcement carries what a caller needs to answer without an API key: the
interrupt's kind and node, and a signed token for ``/v1/interrupts/{token}``. It goes
through the same guard and outbox as every other outbound request.
"""

from __future__ import annotations

from typing import Any

import orjson

from tether.engine.driver import Projector
from tether.openwop.snapshot import interrupt_deadline
from tether.openwop.tokens import TokenSigner
from tether.settings import Settings
from tether.store.base import Extra, Fanout, RunRow


def callback_projector(signer: TokenSigner, settings: Settings) -> Projector:
    """Enqueue a callback when a run with a ``callbackUrl`` reaches a new interrupt."""

    def project(before: RunRow | None, after: RunRow, events: list[dict[str, Any]]) -> list[Extra]:
        url = after.state.get("callbackUrl")
        interrupt = after.state.get("interrupt")
        if not url or not interrupt or not any(e["type"] == "interrupt.requested" for e in events):
            return []
        token = signer.mint(
            after.run_id,
            interrupt["nodeId"],
            interrupt["interruptId"],
            intent="resolve",
            deadline=interrupt_deadline(interrupt),
        )
        body = {
            "runId": after.run_id,
            "status": after.status,
            "interrupt": {
                "kind": interrupt["kind"],
                "nodeId": interrupt["nodeId"],
                "interruptId": interrupt["interruptId"],
                "key": interrupt["key"],
            },
            "interruptToken": token,
            "interruptUrl": f"{settings.base_url}/v1/interrupts/{token}",
        }
        return [
            Fanout(
                kind="callback",
                tenant=after.tenant,
                run_id=after.run_id,
                sequence=after.last_sequence,
                body=orjson.dumps(body),
                url=url,
            )
        ]

    return project
