"""``/console`` and ``/console/static/{name}``: the console's files, with headers that lock the page down.

Every answer carries a Content-Security-Policy that allows only this origin's own scripts,
styles and API (no inline script or style, no third party, no framing, no form posts), so
a page that shows run content written by others cannot be made to run it or to send the
operator's key elsewhere.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Final

from fastapi import APIRouter
from starlette.responses import RedirectResponse, Response

from tether.errors import NotFound

__all__ = ["CONTENT_SECURITY_POLICY", "STATIC_FILES", "router"]

#: the policy of every console answer: own-origin files and API calls, nothing else
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
#: the files under ``static/`` the console serves (nothing else in the package is reachable)
STATIC_FILES: Final = (
    "index.html",
    "console.css",
    "icon.svg",
    "app.js",
    "api.js",
    "dom.js",
    "runs.js",
    "run.js",
    "answer.js",
    "deliveries.js",
)

router = APIRouter(include_in_schema=False)


@cache
def _read(name: str) -> bytes:
    """A shipped file's bytes (read once; the package does not change under a running host)."""
    return resources.files("tether.console").joinpath("static", name).read_bytes()


def _file(name: str, cache_control: str) -> Response:
    suffix = name[name.rfind(".") :]
    headers = {**_HEADERS, "Cache-Control": cache_control}
    return Response(_read(name), media_type=_TYPES[suffix], headers=headers)


@router.get("/console")
async def console_page() -> Response:
    """The one page; the modules it loads render the runs, a run and the deliveries in it."""
    return _file("index.html", "no-store")


@router.get("/console/")
async def console_slash() -> Response:
    return RedirectResponse("/console", status_code=308)


@router.get("/console/static/{name}")
async def console_file(name: str) -> Response:
    """One of the shipped files; revalidated on each load, so an upgraded host serves its own."""
    if name not in STATIC_FILES:
        raise NotFound(f"the console has no file {name!r}")
    return _file(name, "no-cache")
