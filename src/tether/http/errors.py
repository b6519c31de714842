"""The one place errors become HTTP responses: the envelope ``{error, message, details?}``.

A surface may speak its own dialect of codes (OpenWOP major 2 answers only codes of its
registry, each at its registered status): it puts a :data:`Dialect` on the request's state
under :data:`DIALECT`, and every refusal made here goes through it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

from tether.errors import TetherError
from tether.http.middleware import BodyTooLarge, too_large_body
from tether.http.responses import json_response
from tether.ids import new_id

log = logging.getLogger("tether.http")

_STATUS_CODES = {
    400: "validation_error",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
}


#: ``(status, code) -> (status, code)``: how a surface spells a refusal
Dialect = Callable[[int, str], tuple[int, str]]
#: where a request's dialect sits on its state (absent: the codes as raised)
DIALECT = "error_dialect"


def _spoken(request: Request, status: int, code: str) -> tuple[int, str]:
    dialect: Dialect | None = request.scope.get("state", {}).get(DIALECT)
    return (status, code) if dialect is None else dialect(status, code)


def envelope(
    status: int, code: str, message: str, details: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> Response:
    body: dict[str, Any] = {"error": code, "message": message}
    if details:
        body["details"] = details
    if status == 401:
        headers = {"WWW-Authenticate": 'Bearer realm="tether"', **(headers or {})}
    return json_response(body, status, headers)


def _tether_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TetherError)
    status, code = _spoken(request, exc.status, exc.code)
    if exc.status >= 500:
        correlation = new_id("err_")
        log.error("request failed [%s]: %s", correlation, exc.message)
        return envelope(status, code, exc.message, {**(exc.details or {}), "correlationId": correlation})
    return envelope(status, code, exc.message, exc.details)


def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = []
    for err in exc.errors():
        location = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        errors.append({"path": location, "message": err.get("msg", "invalid")})
    first = errors[0] if errors else {"path": "", "message": "invalid request"}
    message = f"{first['path']}: {first['message']}" if first["path"] else first["message"]
    status, code = _spoken(request, 400, "validation_error")
    return envelope(status, code, message, {"errors": errors})


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = _STATUS_CODES.get(exc.status_code, "internal_error" if exc.status_code >= 500 else "http_error")
    message = exc.detail if isinstance(exc.detail, str) else "request refused"
    if exc.status_code == 404 and message == "Not Found":
        message = f"no route {request.method} {request.url.path}"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
        headers["Allow"] = ", ".join(served_methods(request))
    status, code = _spoken(request, exc.status_code, code)
    return envelope(status, code, message, headers=headers)


#: the methods a 405's ``Allow`` may name
_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def served_methods(request: Request) -> list[str]:
    """Every method some route serves at the request's path (Starlette's 405 names only the first route's)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)
    ]


def _too_large(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BodyTooLarge)
    return Response(too_large_body(request.url.path, exc.limit), 413, media_type="application/json")


def _unexpected(request: Request, exc: Exception) -> Response:
    correlation = new_id("err_")
    log.exception("unexpected error [%s]", correlation)
    status, code = _spoken(request, 500, "internal_error")
    return envelope(status, code, "the host failed to handle this request", {"correlationId": correlation})


def install(app: FastAPI) -> None:
    app.add_exception_handler(TetherError, _tether_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(BodyTooLarge, _too_large)
    app.add_exception_handler(Exception, _unexpected)
