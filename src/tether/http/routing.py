"""Routes only some requests can reach: a table of its own, matched only when a request is of its kind.

Starlette matches a request against every route in order, each a regular expression. The
OpenWOP v2 routes come after every v1 route and every route of Tether's own; matched in
one table, a v2 request paid for all of them (about 85 µs a request, the most of what
``GET /runs/{id}`` cost beyond its v1 twin). A :class:`Kind` placed first answers in one
comparison for requests not of its kind, and matches its own requests against its own
routes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

__all__ = ["Kind"]

#: where the matched inner route waits for ``handle`` in the request's scope
_CHOSEN = "tether.route"


class Kind(BaseRoute):
    """``routes``, reachable only by the requests ``accepts`` says are theirs."""

    def __init__(self, accepts: Callable[[Scope], bool], routes: Sequence[BaseRoute]) -> None:
        self.accepts = accepts
        self.routes = list(routes)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if not self.accepts(scope):
            return Match.NONE, {}
        partial: tuple[BaseRoute, Scope] | None = None
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                return Match.FULL, {**child, _CHOSEN: route}
            if match is Match.PARTIAL and partial is None:
                partial = route, child
        if partial is not None:  # the path is one of ours, for another method: its route answers 405
            return Match.PARTIAL, {**partial[1], _CHOSEN: partial[0]}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route: BaseRoute = scope.pop(_CHOSEN)
        await route.handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        for route in self.routes:
            try:
                return route.url_path_for(name, **path_params)
            except NoMatchFound:
                continue
        raise NoMatchFound(name, path_params)
