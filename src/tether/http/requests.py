"""Request-level helpers: authentication per scope, JSON bodies, content types."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tether.auth.keys import KeyVerifier
from tether.errors import Forbidden, InvalidInput, TetherError
from tether.types import Principal


class UnsupportedMediaType(TetherError):
    """The body is not JSON."""

    code = "unsupported_media_type"
    status = 415


def verifier_of(request: Request) -> KeyVerifier:
    """The key verifier of the app serving ``request`` (put on its state by the lifespan)."""
    verifier: KeyVerifier = request.app.state.verifier
    return verifier


#: the API key as the OpenAPI document declares it (``securitySchemes``); ``require`` checks it, this never refuses
API_KEY = HTTPBearer(
    scheme_name="apiKey",
    description="A Tether API key (`tether keys create`): `Authorization: Bearer tk_<id>_<secret>`.",
    auto_error=False,
)


def require(scope: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency that authenticates the caller and checks one scope (401, then 403)."""

    async def dependency(
        request: Request, declared: HTTPAuthorizationCredentials | None = Security(API_KEY)
    ) -> Principal:
        principal = await verifier_of(request).verify(request.headers.get("authorization"))
        if not principal.can(scope):
            raise Forbidden(f"this API key lacks the scope {scope!r}", details={"scopeRequired": scope})
        request.state.principal = principal
        return principal

    dependency.__name__ = f"require_{scope.replace(':', '_')}"
    return dependency


async def json_body(request: Request, *, required: bool = True) -> Any:
    """The parsed JSON body; refuses other content types and malformed JSON clearly."""
    raw = await request.body()
    if not raw:
        if required:
            raise InvalidInput("this endpoint needs a JSON body")
        return None
    content_type = request.headers.get("content-type", "")
    if content_type and "json" not in content_type.split(";")[0]:
        raise UnsupportedMediaType(f"send the body as application/json, not {content_type.split(';')[0]!r}")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"the body is not valid JSON: {exc}") from exc


def json_object(value: Any, what: str = "the body") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object")
    return value


def body_schema(model: type[Any]) -> dict[str, Any]:
    """``openapi_extra`` that documents a request body parsed by hand with ``model``."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": model.model_json_schema(ref_template="#/components/schemas/{model}")}
            },
        }
    }


def parse_model(model: type[Any], value: Any) -> Any:
    """Validate a parsed body with a pydantic model; errors name the field."""
    from pydantic import ValidationError

    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errors = [{"path": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()]
        first = errors[0]
        where = f"{first['path']}: " if first["path"] else ""
        raise InvalidInput(f"{where}{first['message']}", details={"errors": errors}) from exc
