"""Refusals at major 2: only codes of the v2 registry (``spec/v2/errors.json``), each at its registered status.

Tether's errors carry the codes major 1 answers. :func:`dialect` renames the few the v2
registry does not have and sets every status from the registry, so one raise serves
both majors. ``tests/v2/test_conformance_floor.py`` holds the refusals a v2 request gets to
the statuses of its copy of the registry (no test compares :data:`REGISTERED` with the file).
"""

from __future__ import annotations

__all__ = ["REGISTERED", "dialect"]

#: the v2 codes Tether answers, at their registered statuses
REGISTERED: dict[str, int] = {
    "validation_error": 400,
    "idempotency_key_invalid": 400,
    "protocol_version_mismatch": 400,
    "unsupported_stream_mode": 400,
    "webhook_url_rejected": 400,
    "interop_version_unsupported": 400,
    "unauthenticated": 401,
    "key_revoked": 401,
    "interrupt_token_invalid": 401,
    "forbidden": 403,
    "id_tenant_mismatch": 403,
    "run_forbidden": 403,
    "not_found": 404,
    "interrupt_not_found": 404,
    "protocol_version_unsupported": 406,
    "idempotency_in_flight": 409,
    "idempotency_key_mismatch": 409,
    "interrupt_already_resolved": 409,
    "run_state_conflict": 409,
    "run_terminal": 409,
    "interrupt_expired": 410,
    "interrupt_cancelled": 410,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "capability_not_provided": 422,
    "fork_point_invalid": 422,
    "internal_error": 500,
    "event_type_unmapped": 500,
    "payload_unprojectable": 500,
    "service_unavailable": 503,
}

#: major-1 codes the v2 registry spells otherwise (or not at all)
_RENAMED = {
    "approval_token_invalid": "interrupt_token_invalid",
    "subscription_not_found": "not_found",
    "run_busy": "run_state_conflict",
    "conflict": "run_state_conflict",
    # an operation this path does not serve: v2 has no 405 code; an unserved operation is 404 (RFC 0228)
    "method_not_allowed": "not_found",
}
#: a code of neither list, by its status
_BY_STATUS = {
    400: "validation_error",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    409: "run_state_conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    503: "service_unavailable",
}


def dialect(status: int, code: str) -> tuple[int, str]:
    """``(status, code)`` as major 2 answers it: a registered code, at its registered status."""
    code = _RENAMED.get(code, code)
    if code not in REGISTERED:
        code = _BY_STATUS.get(status, "internal_error" if status >= 500 else "validation_error")
    return REGISTERED[code], code
