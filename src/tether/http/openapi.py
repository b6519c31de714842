"""The OpenAPI document says what the server really answers: each refusal a route gives, in the real envelope.

FastAPI infers request shapes and the success answer from the routes; what it cannot infer
is which refusals a route gives, and it adds a 422 ``HTTPValidationError`` to every route
with parameters, a shape this host never sends (``tether.http.errors`` answers request
validation with 400 and the envelope). Routes declare their refusals with ``refusals``;
``install`` serves the document with FastAPI's invented 422 taken out.
``tests/e2e/test_openapi_schemathesis.py`` holds the document to what the server does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field
from starlette.routing import BaseRoute

__all__ = [
    "AUTHENTICATED",
    "JSON_BODY",
    "ErrorEnvelope",
    "answer",
    "document_of",
    "event_stream",
    "install",
    "refusals",
]


class ErrorEnvelope(BaseModel):
    """Every refusal's body (OpenWOP ``error-envelope.schema.json``): a code, a sentence, what it concerns."""

    model_config = ConfigDict(extra="forbid")

    error: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="A stable machine code, e.g. validation_error.")
    message: str = Field(min_length=1, description="What was wrong, for people.")
    details: dict[str, Any] = Field(default_factory=dict, description="What it concerns (field, ids, limits).")


#: why each status is answered, as the document words it
_REASONS = {
    400: "The request is malformed or its content invalid (the message names the field).",
    401: "No API key, or one that is unknown or revoked.",
    403: "The API key lacks the scope, or names another tenant.",
    404: "No such resource (or it belongs to another tenant).",
    409: "The request contradicts the resource's state, or reuses an Idempotency-Key with another body.",
    410: "The resource has expired.",
    413: "The request body is larger than this host's limit.",
    415: "The body is not JSON.",
    422: "The request is valid, but the resource's state makes it meaningless.",
}

#: what every route behind an API key may answer: no key (401), or one without the scope (403)
AUTHENTICATED = (401, 403)
#: what every route reading a JSON body may answer besides its own refusals
JSON_BODY = (400, 413, 415)


def refusals(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: each status it refuses with, described, with the envelope as its body."""
    return {code: {"model": ErrorEnvelope, "description": _REASONS[code]} for code in sorted(set(codes))}


def answer(
    status: int, description: str, schema: dict[str, Any] | None = None, media_type: str = "application/json"
) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a success a route renders itself, with no response model (by default a JSON object)."""
    body = schema if schema is not None else {"type": "object"}
    return {status: {"description": description, "content": {media_type: {"schema": body}}}}


def event_stream(description: str, events: tuple[str, ...] | None = None) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a 200 stream of server-sent events: ``events`` names them (None: any name).

    Before OpenAPI 3.2 (this document is 3.1), a ``text/event-stream`` schema describes one
    event, read as its fields: its name, its ``id:`` and its ``data:``, JSON text here.
    """
    name: dict[str, Any] = {"type": "string"} if events is None else {"enum": list(events)}
    schema = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": name,
            "id": {"type": "string"},
            "data": {"type": "string", "contentMediaType": "application/json"},
        },
    }
    return answer(200, description, schema, "text/event-stream")


def document_of(
    title: str, version: str, description: str, routes: Sequence[BaseRoute], extra_paths: dict[str, Any] | None = None
) -> dict[str, Any]:
    """FastAPI's document of ``routes``, less the 422 ``HTTPValidationError`` no route sends, plus
    ``extra_paths``: operations answered in front of the app (an ASGI layer of their own), declared as they are."""
    document = get_openapi(title=title, version=version, description=description, routes=routes)
    document.setdefault("paths", {}).update(extra_paths or {})
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            _drop_invented_422(operation.get("responses", {}))
    schemas = document.get("components", {}).get("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    return document


def openapi_document(app: FastAPI, extra_paths: dict[str, Any] | None = None) -> dict[str, Any]:
    """The app's document, built once."""
    if app.openapi_schema is None:
        app.openapi_schema = document_of(app.title, app.version, app.description, app.routes, extra_paths)
    return app.openapi_schema


def _drop_invented_422(responses: dict[str, Any]) -> None:
    answer = responses.get("422", {})
    schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
    if schema.get("$ref", "").endswith("/HTTPValidationError"):
        del responses["422"]


def install(app: FastAPI, extra_paths: dict[str, Any] | None = None) -> None:
    """Serve ``openapi_document`` at the app's ``openapi_url``."""

    def document() -> dict[str, Any]:
        return openapi_document(app, extra_paths)

    app.openapi = document  # type: ignore[method-assign]
