"""The two ways a command reaches Tether: the store itself, or a running host's REST API.

A command asks for one with a decorator, which adds the options naming where (and only
those) and hands the command what they lead to: ``@on_store`` a ``LocalStore`` (``--data-dir``,
``--database-url``), for ``keys`` and ``credentials``, which work before a first ``tether
serve``; ``@on_host`` an open ``HostClient`` (``--url``, ``--key``), for every command that
asks the host like any other client. So each command says where it goes in one line, and every
command that goes there checks and opens it the same way.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from tether.cli._client import DEFAULT_URL, HostClient
from tether.cli._output import EXIT_UNREACHABLE, fail
from tether.store.base import Store

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _host_options(command: F) -> F:
    """``--url`` and ``--key`` for commands that talk to a running host."""
    command = click.option(
        "--key",
        envvar="TETHER_API_KEY",
        show_envvar=True,
        help="API key (tk_...) sent as 'Authorization: Bearer'.",
    )(command)
    command = click.option(
        "--url",
        envvar="TETHER_URL",
        default=DEFAULT_URL,
        show_default=True,
        show_envvar=True,
        help="Base URL of the Tether host.",
    )(command)
    return command


def on_host(command: Callable[..., T]) -> Callable[..., T]:
    """Give ``command`` a ``client``: the REST API of the host at ``--url``, with ``--key``, closed after it."""

    @functools.wraps(command)
    def with_host(*args: Any, url: str, key: str | None, **params: Any) -> T:
        with _connect(url, key) as client:
            return command(*args, client=client, **params)

    return _host_options(with_host)


def _connect(url: str, key: str | None) -> HostClient:
    """The host's REST API with ``key``: every route the CLI calls needs one, so a missing key is told up front."""
    if not key:
        fail(
            "error: this command needs an API key: pass --key tk_..., or set TETHER_API_KEY "
            "(make one with: tether keys create --name NAME)",
            EXIT_UNREACHABLE,
        )
    return HostClient(url, key)


def store_options(command: F) -> F:
    """``--data-dir`` and ``--database-url``: where the store is (``serve`` hands them to the host as they are)."""
    command = click.option(
        "--database-url",
        envvar="TETHER_DATABASE_URL",
        show_envvar=True,
        help="Where runs are kept instead of <data-dir>/tether.db: postgresql://USER@HOST:PORT/DBNAME (every host "
        "on one database serves the same runs) or sqlite:PATH.",
    )(command)
    command = click.option(
        "--data-dir",
        envvar="TETHER_DATA_DIR",
        default=".tether",
        show_default=True,
        show_envvar=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Directory holding the host's data (tether.db).",
    )(command)
    return command


@dataclass(frozen=True)
class LocalStore:
    """The store ``--data-dir`` or ``--database-url`` names, opened afresh for each operation."""

    data_dir: Path
    database_url: str | None
    #: ``data_dir`` is the default (``./.tether``), not a directory someone named
    implicit: bool

    def run(self, operation: Callable[[Store], Awaitable[T]], *, create: bool = False) -> T:
        """Open the store, run one operation, close it: the CLI's whole relationship with storage.

        Run with the default ``--data-dir`` where there is no store, a command that
        ``create``s (``keys create``, before a first ``tether serve``) says which directory it
        made; any other command refuses, naming the directory it looked in, instead of making
        an empty one. A directory named on purpose is used as given.
        """
        from tether.store import open_store

        data_dir, database_url = self.data_dir, self.database_url
        if self.implicit and database_url is None and not (data_dir / "tether.db").exists():
            where = data_dir.absolute()
            if not create:
                fail(
                    f"error: no Tether data in {where} (the default --data-dir): pass --data-dir, or set "
                    "TETHER_DATA_DIR, to the directory `tether serve --data-dir` uses"
                )
            click.echo(f"note: made a new Tether data directory at {where} (serve it with: tether serve)", err=True)

        try:
            store = open_store(data_dir=str(data_dir), database_url=database_url)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--database-url'") from exc

        async def run() -> T:
            await store.open()
            try:
                return await operation(store)
            finally:
                await store.close()

        return asyncio.run(run())


def on_store(command: Callable[..., T]) -> Callable[..., T]:
    """Give ``command`` a ``local``: the ``LocalStore`` that ``--data-dir`` or ``--database-url`` names."""

    @functools.wraps(command)
    def with_store(*args: Any, data_dir: Path, database_url: str | None, **params: Any) -> T:
        source = click.get_current_context().get_parameter_source("data_dir")
        local = LocalStore(data_dir, database_url, implicit=source is click.core.ParameterSource.DEFAULT)
        return command(*args, local=local, **params)

    return store_options(with_store)
