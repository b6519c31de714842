"""Outbound HTTP for Tether: one egress guard and the one guarded client every outbound request uses.

``guard`` decides (scheme, url and address arms; registration time and before every attempt);
``transport`` enforces (connect only to checked addresses, SNI/Host kept, no redirects, no
environment proxies, capped size and time). ``outbox`` sends what the store's outbox holds
(A2A pushes, webhooks signed by ``signing``, run callbacks); ``service`` builds them all once
for a host.
"""

from __future__ import annotations

from tether.egress.guard import (
    EgressArm,
    EgressGuard,
    EgressPolicy,
    EgressRefused,
    IPAddress,
    ParsedTarget,
    PinnedTarget,
    Resolver,
    SystemResolver,
    classify_address,
)
from tether.egress.transport import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    EgressClient,
    EgressResponseTooLarge,
    GuardedTransport,
    build_egress_client,
    make_ssl_context,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOTAL_TIMEOUT",
    "EgressArm",
    "EgressClient",
    "EgressGuard",
    "EgressPolicy",
    "EgressRefused",
    "EgressResponseTooLarge",
    "GuardedTransport",
    "IPAddress",
    "ParsedTarget",
    "PinnedTarget",
    "Resolver",
    "SystemResolver",
    "build_egress_client",
    "classify_address",
    "make_ssl_context",
]
