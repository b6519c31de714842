"""Start-up failures as one line that says what is wrong and what to do.

A host that cannot start (its port taken, its data directory read-only, its SQLite file
served by another host, its PostgreSQL database or role missing, a host key the database
was not first used with) used to print one clear line and then a long traceback from deep
inside uvicorn's lifespan. The traceback is for the developer of Tether, not for the
operator: ``LifespanGuard`` keeps the failure instead of letting it be logged, and
``explain`` turns it into the line the operator reads. ``--log-level debug`` brings the
traceback back.
"""

from __future__ import annotations

import errno
import logging
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.errors import StoreUnavailable, TetherError

__all__ = ["EXIT_STARTUP_FAILED", "LifespanGuard", "StartupFailed", "explain", "quiet_uvicorn_startup_failure"]

#: the exit status of a host that could not start (uvicorn's own for a failed lifespan)
EXIT_STARTUP_FAILED = 3

_DEBUG_HINT = "run with --log-level debug for the traceback"
#: what a file the host must write answers when this user may not write it (or nobody may: a read-only mount)
_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
#: what PostgreSQL says of a missing role or database, naming it
_MISSING = re.compile(r'(role|database) "([^"]+)" does not exist')


class StartupFailed(Exception):
    """The host could not start; the message is the one line to print."""


def explain(exc: BaseException, *, host: str = "", port: int = 0) -> str:
    """The line an operator reads for ``exc``: what is wrong, then what to do about it."""
    if isinstance(exc, StartupFailed):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use (another `tether serve`?): "
            "stop that process, or pick another --port"
        )
    if isinstance(exc, OSError) and exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot bind to {host}: this machine has no such address; pick another --host"
    if isinstance(exc, OSError) and exc.errno in _UNWRITABLE and exc.filename is not None:
        reason = (exc.strerror or "not writable").lower()
        return f"cannot write {exc.filename} ({reason}): give --data-dir a directory this user can write"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc}; run as a user that may bind that port and write the data directory"
    if isinstance(exc, StoreUnavailable):
        missing = _MISSING.search(exc.message)
        if missing and missing.group(1) == "role":
            return (
                f"{exc.message}: create that PostgreSQL user (`createuser {missing.group(2)}`), "
                "or name an existing one in --database-url"
            )
        if missing:
            return f"{exc.message}: create it first (`createdb {missing.group(2)}`), or fix --database-url"
        return f"{exc.message}: check that PostgreSQL runs and that --database-url is right"
    if isinstance(exc, TetherError):
        return exc.message
    text = str(exc) or type(exc).__name__
    if type(exc).__module__.startswith("tether."):
        return text  # Tether's own start-up refusals say what to do already
    return f"could not start: {type(exc).__name__}: {text} ({_DEBUG_HINT})"


class LifespanGuard:
    """In front of the app: keeps a failed start-up's exception instead of logging its traceback.

    Starlette reports a lifespan failure to the server with the whole traceback as the
    message, and uvicorn logs it; with ``debug`` off the message is dropped and the
    exception kept on ``failure`` for the caller to ``explain``.
    """

    def __init__(self, app: ASGIApp, *, debug: bool = False) -> None:
        self.app = app
        self.debug = debug
        #: why start-up failed, once it has
        self.failure: BaseException | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def quiet(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed" and not self.debug:
                message = {"type": "lifespan.startup.failed", "message": ""}
            await send(message)

        try:
            await self.app(scope, receive, quiet)
        except BaseException as exc:
            self.failure = exc
            if self.debug:
                raise


class _DropStartupFailure(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Application startup failed")


def quiet_uvicorn_startup_failure() -> None:
    """uvicorn's own "Application startup failed. Exiting." adds nothing to the line Tether prints."""
    logging.getLogger("uvicorn.error").addFilter(_DropStartupFailure())
