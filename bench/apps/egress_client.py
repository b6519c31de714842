"""The ceiling of Tether's egress client: its guarded client posting to one receiver, no store.

    python bench/apps/egress_client.py --url https://127.0.0.1:PORT/x --ca CA.pem --requests N

It builds the client the outbox uses (``build_egress_client``: the egress guard, the pinned
transport, its pool), sends the way the outbox does (``deliver`` where the build has it)
and keeps ``--concurrency`` posts of a webhook-sized body in flight.
What it reaches is the most the outbox could send from one process on this machine, before
the store, the worker's bookkeeping and the rest of the host take their share. Prints JSON:
requests, seconds, rps, and the process's CPU (100 = one core).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

from tether.egress import EgressGuard, EgressPolicy, build_egress_client, make_ssl_context

BODY = json.dumps({"runId": "r" * 26, "event": {"type": "run.completed", "timestamp": "x" * 24, "data": {}}}).encode()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--ca", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    guard = EgressGuard(EgressPolicy(allow_cidrs=("127.0.0.1/32",)))
    client = build_egress_client(guard, make_ssl_context(args.ca))
    # the outbox's own path where the build has one (EgressClient.deliver), else what it used: post
    deliver = getattr(client, "deliver", None)
    remaining = iter(range(args.requests))
    failed = 0

    async def worker() -> None:
        nonlocal failed
        for i in remaining:
            headers = {"webhook-id": f"dlv_{i}"}
            if deliver is not None:
                answer = await deliver(args.url, BODY, headers)
            else:
                answer = await client.post(args.url, content=BODY, headers=headers)
            failed += not 200 <= answer.status_code < 300

    async with client:
        cpu0, t0 = sum(os.times()[:2]), time.monotonic()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        elapsed, cpu = time.monotonic() - t0, sum(os.times()[:2]) - cpu0
    print(
        json.dumps(
            {
                "requests": args.requests,
                "failed": failed,
                "seconds": round(elapsed, 3),
                "rps": round(args.requests / elapsed, 1),
                "cpu_pct": round(100 * cpu / elapsed, 1),
            }
        )
    )


if __name__ == "__main__":
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
