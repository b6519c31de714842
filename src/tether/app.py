"""The composition root: builds every piece in order and wires them into one ASGI app.

settings → store → workflow registry → engine (with its projectors) → key verifier and
token signer → routes and middleware. Nothing else constructs these, and nothing here is
global.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import NoReturn

import uvicorn
from fastapi import APIRouter, FastAPI

from tether import __version__, tracing
from tether.a2a import routes as a2a_routes
from tether.a2a.capabilities import a2a_capabilities
from tether.a2a.endpoint import A2AEndpoint
from tether.a2a.files import FileLimits
from tether.a2a.peer import OutboundCredentials, PeerClient, PushReceiver
from tether.a2a.peer import router as handoff_router
from tether.a2a.push import push_projector
from tether.a2a.surface import A2ASurface
from tether.a2a.tasks import project_task_record
from tether.a2a.v1_0.protojson import push_body
from tether.auth.keys import KeyVerifier, create_key
from tether.auth.signing_keys import ensure_signing_key
from tether.console import router as console_router
from tether.egress.service import build_egress
from tether.engine.cluster import LeaseSettings
from tether.engine.engine import Engine
from tether.engine.follow import RunLogs
from tether.engine.handoff.follower import HandoffSettings
from tether.engine.nodes import Handler, node_handlers
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry, bundled_workflows, folder_workflows
from tether.engine.retention import Retention
from tether.engine.run_feed import RunFeed
from tether.engine.validation import load_workflow_file
from tether.http import errors, openapi
from tether.http.middleware import BodyLimit, DateHeader, TraceparentEcho
from tether.http.routing import Kind
from tether.ids import new_id
from tether.openwop import discovery, events, interrupts, runs, webhooks, workflows
from tether.openwop import watch as runs_watch
from tether.openwop.callbacks import callback_projector
from tether.openwop.surface import RestSurface
from tether.openwop.tokens import TokenSigner
from tether.openwop.v2 import control as v2_control
from tether.openwop.v2 import discovery as v2_discovery
from tether.openwop.v2 import effect_seams as v2_effect_seams
from tether.openwop.v2 import effects as v2_effects
from tether.openwop.v2 import events as v2_events
from tether.openwop.v2 import fork as v2_fork
from tether.openwop.v2 import interrupts as v2_interrupts
from tether.openwop.v2 import runs as v2_runs
from tether.openwop.v2 import seams as v2_seams
from tether.openwop.v2 import webhooks as v2_webhooks
from tether.openwop.v2.catalog import catalog_router
from tether.openwop.versions import MajorSelection, major_of
from tether.openwop.webhooks import webhook_fanout
from tether.ops.health import Check, HealthEndpoints, Readiness
from tether.ops.logs import HostLines, InfoLines
from tether.ops.logs import configure as configure_logging
from tether.ops.metrics import Metrics, MetricsEndpoint, RunWatch
from tether.ops.observe import Observed
from tether.ops.startup import EXIT_STARTUP_FAILED, LifespanGuard, explain, quiet_uvicorn_startup_failure
from tether.settings import Settings
from tether.store import open_store
from tether.store.base import Store, WorkflowRow
from tether.store.sqlite import SqliteStore

log = logging.getLogger("tether")


def host_secret(path: Path) -> bytes:
    """The host key (``--secret-key-file``, by default ``<data-dir>/host.key``), made 0600 on first start."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another host sharing the key made it first
            return path.read_bytes()
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
    key = path.read_bytes()
    if len(key) < 32:
        raise ValueError(f"the host key {path} holds {len(key)} bytes; it needs at least 32 random bytes")
    return key


def host_identity(data_dir: Path) -> str:
    """This host's stable name among hosts sharing a database (``<data-dir>/host.id``).

    It survives restarts, so a host that crashed and came back re-takes its own runs at
    once instead of waiting for their leases to expire.
    """
    path = data_dir / "host.id"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(new_id("host_"))
    return path.read_text().strip()


def node_types(settings: Settings) -> dict[str, Handler]:
    """The node types this host runs (the conformance hand-off names only with the seams and a peer)."""
    return node_handlers(test_seams=settings.enable_test_seams, conformance_peer=settings.a2a_conformance_peer_url)


async def load_registry(settings: Settings, store: Store) -> WorkflowRegistry:
    """Bundled workflows, then ``--workflows``, then fixtures seeded now or before."""
    registry = WorkflowRegistry(frozenset(node_types(settings)))
    registry.add(bundled_workflows(), "bundled")
    if settings.workflows_dir is not None:
        registry.add(folder_workflows(settings.workflows_dir), "dir")
    if settings.seed_fixtures is not None:
        from tether import clock

        for file in sorted(settings.seed_fixtures.glob("*.json")):
            wf = load_workflow_file(file)
            await store.put_workflow(WorkflowRow(wf.id, wf.raw, "fixture", clock.now_iso()))
    for row in await store.list_workflows():
        registry.add_raw(row.definition, row.source)
    return registry


class HostKeyMismatch(RuntimeError):
    """This host's key is not the one the store was first used with."""


async def check_host_key(store: Store, key: bytes, path: Path) -> None:
    """Refuse to start with a host key other than the one the store was first used with.

    Secrets sealed and tokens signed by one host must open on every other, so all hosts
    of one database share one key; a host with another key would fail quietly (pushes
    dead-lettered, tokens refused). It fails loudly here instead.
    """
    fingerprint = host_key_fingerprint(key)
    stored = await store.claim_setting("host_key_fingerprint", fingerprint)
    if stored != fingerprint:
        raise HostKeyMismatch(
            f"the host key {path} is not the key this database was first used with: start every host "
            "of one database with the same --secret-key-file (the key seals push secrets and signs tokens)"
        )


def host_key_fingerprint(key: bytes) -> str:
    """What the store remembers of the host key: enough to compare, nothing to recover it from."""
    return hashlib.sha256(b"tether:host-key-check:v1\0" + key).hexdigest()[:32]


def readiness_checks(store: Store, engine: Engine, key: bytes) -> list[tuple[str, Check]]:
    """What ``/readyz`` asks each time: the store answers through its write path; the lease loops run."""
    fingerprint = host_key_fingerprint(key)

    async def store_answers() -> str | None:
        # a no-op write: on SQLite it passes through the writer process, so it proves that process runs too
        stored = await store.claim_setting("host_key_fingerprint", fingerprint)
        return None if stored == fingerprint else "the store holds another host key's fingerprint"

    checks: list[tuple[str, Check]] = [("store", store_answers)]
    cluster = engine.cluster
    if cluster is not None:

        async def leases_renewed() -> str | None:
            return None if cluster.running else "the lease heartbeat or orphan scan has stopped"

        checks.append(("leases", leases_renewed))
    return checks


async def ensure_dev_key(store: Store) -> str | None:
    """At first start (no key at all), create a development key and return it, once."""
    if await store.list_keys():
        return None
    return await create_key(store, "dev")


def open_store_for(settings: Settings) -> Store:
    """The store the settings name; a SQLite store also takes its data directory's host lock."""
    store = open_store(data_dir=str(settings.data_dir), database_url=settings.database_url)
    if isinstance(store, SqliteStore):
        store.serve()  # StoreInUse: another host serves this file (``tether serve`` explains it)
    return store


def build_app(settings: Settings, lines: InfoLines | None = None) -> A2AEndpoint:
    """The ASGI app: the A2A endpoint in front of the REST app, whose lifespan builds and runs the host.

    Start-up goes in the order below and shut-down in reverse, both owned by one exit
    stack: the store closes last, after the engine and the outbox have stopped.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            store = open_store_for(settings)
            await store.open()
            stack.push_async_callback(store.close)
            metrics.timed_commits(store)
            app.state.store = store  # what /metrics reads its gauges from, while it is open
            stack.callback(setattr, app.state, "store", None)
            serving = False
            say = HostLines(settings.log_format).say

            def stopped() -> None:  # after the engine and the outbox, before the store closes
                if serving:
                    say("stopped", "stopped; every acknowledged run is on disk")

            stack.callback(stopped)
            key = host_secret(settings.host_key_path)
            await check_host_key(store, key, settings.host_key_path)
            registry = await load_registry(settings, store)
            notifier = Notifier(fallback=settings.fallback_poll_seconds if store.shared else None)
            owner = host_identity(settings.data_dir)
            egress = build_egress(
                settings,
                store,
                key,
                owner=owner,
                push_body=push_body,
                webhook_body=v2_webhooks.webhook_body(settings),
                # a peer's answer may carry as many file bytes as a message sent here (base64 on the wire)
                handoff_response_bytes=FileLimits.of(settings).body_limit(settings.max_body_bytes),
            )
            stack.push_async_callback(egress.close)
            await ensure_signing_key(store, egress.box)  # the certification key, made once per store
            signer = TokenSigner(key, settings.interrupt_token_ttl)
            logs = RunLogs(store, notifier, on_fanout=metrics.stream_fanout.observe)
            feed = RunFeed(store, runs_watch.run_summary)
            store.on_hints_missed(feed.missed)
            # hand-off nodes reach other agents through the guarded egress client
            peers = PeerClient(
                egress.handoff_client,
                host_key=key,
                public_url=settings.base_url,
                limits=FileLimits.of(settings),
                credentials=OutboundCredentials(store, egress.box),
                minimum_version=settings.a2a_minimum_version,
            )
            engine = Engine(
                store,
                registry,
                notifier,
                # what every commit writes beside its events and run row, in its transaction
                projectors=[
                    project_task_record,
                    webhook_fanout,
                    push_projector(settings.push_body),
                    callback_projector(signer, settings),
                ],
                # what learns of each durable commit, before observers are woken
                on_commit=[
                    lambda commit, enqueued: egress.worker.wake() if enqueued else None,
                    lambda commit, enqueued: logs.committed(commit),
                    watch.committed,
                    feed.committed,
                ],
                # what learns of each run another host changed (the hints of a shared store)
                on_hint=[feed.hinted],
                owner=owner,
                leases=LeaseSettings(settings.lease_seconds),
                peers=peers,
                handoffs=HandoffSettings(
                    poll_max=settings.handoff_poll_max_seconds, after_send=a2a_routes.handoff_pause(settings)
                ),
                handlers=node_types(settings),
            )
            app.state.handoff_pushes = PushReceiver(key, engine.handoff_pushed)
            engine.on_taken_over = metrics.runs_taken_over.inc
            verifier = KeyVerifier(store, settings.key_cache_seconds)
            a2a = a2a_capabilities(settings)
            app.state.verifier = verifier
            app.state.logs = logs
            app.state.run_feed = feed
            app.state.a2a = A2ASurface(
                settings, a2a, store, engine, registry, logs, verifier, egress.guard, egress.box, peers
            )
            app.state.rest = RestSurface(
                settings,
                store,
                engine,
                registry,
                notifier,
                logs,
                feed,
                signer,
                egress.guard,
                egress.box,
                egress.worker,
                transports=a2a.transports,
                families={"a2a": a2a.discovery_block()},
                # RFC 0100's block at major 2: 1.0 on the interface whose task ids are bound run ids,
                # 1.0 its floor: a host whose hand-offs may speak 0.3 (--a2a-minimum-version) cannot claim it
                v2_families=(
                    {"a2a": v2_discovery.family("seam-gated", **a2a.v2_facets())}
                    if settings.a2a_minimum_version == "1.0"
                    else {}
                ),
            )
            dev_key = await ensure_dev_key(store)
            resumed = await engine.start()
            stack.push_async_callback(engine.stop)
            egress.worker.on_attempt = metrics.delivery_attempt
            egress.start()
            if settings.task_retention > 0:
                retention = Retention(store, settings.task_retention, on_purged=metrics.runs_purged.inc)
                retention.start()
                stack.push_async_callback(retention.stop)
            app.state.first_start_key = dev_key
            if dev_key is not None:
                made = "first start, created API key 'dev' (shown once)"
                say("dev-key-created", made, text=f"{made}:\n{dev_key}", key_name="dev", api_key=dev_key)
            readiness.started(readiness_checks(store, engine, key))
            if settings.metrics_port is not None:
                scheme = "https" if settings.tls_certfile else "http"
                metrics_url = f"{scheme}://{settings.host}:{settings.metrics_port}/metrics"
                say("metrics", f"metrics at {metrics_url}", url=metrics_url)
            url = settings.base_url
            say("serving", f"resumed {resumed} unfinished run(s); serving on {url}", resumed=resumed, url=url)
            serving = True
            yield

    app = FastAPI(
        title="Tether",
        version=__version__,
        description="An OpenWOP v1 host whose runs are durable A2A tasks.",
        lifespan=lifespan,
        openapi_url="/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    readiness = app.state.readiness = Readiness()
    metrics = app.state.metrics = Metrics()
    watch = RunWatch(metrics, lines)
    app.state.lines = lines
    app.state.store = None
    errors.install(app)
    routers = [
        discovery.router,
        workflows.router,
        runs_watch.router,
        runs.router,
        events.router,
        interrupts.router,
        webhooks.router,
        console_router,
        a2a_routes.router,
        handoff_router,
        a2a_routes.seams_router(settings.enable_test_seams),
        v2_seams.seams_router(settings.enable_test_seams),
        v2_effect_seams.effect_seams_router(settings.enable_test_seams),
    ]
    for router in routers:
        app.include_router(router)
    # major 2 on the unversioned paths, documented at /openapi.json (/v1/openapi.json documents major 1 only),
    # in a table of its own that only major-2 requests are matched against, ahead of all the others
    v2_routers = (
        v2_runs.router,
        v2_events.router,
        v2_interrupts.router,
        v2_control.router,
        v2_webhooks.router,
        v2_fork.router,
        v2_effects.router,
    )
    v2 = APIRouter()
    for router in (*v2_routers, catalog_router(v2_routers)):
        v2.include_router(router)
    app.router.routes.insert(0, Kind(lambda scope: major_of(scope) == 2, v2.routes))
    openapi.install(app, a2a_routes.OPENAPI_PATHS)
    app.add_middleware(TraceparentEcho)
    app.add_middleware(DateHeader)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(MajorSelection)  # outermost: a 413 names its major too
    # in front of it all: A2A calls skip the REST stack; their bodies may carry files up to the A2A file limits
    return A2AEndpoint(app, limit=FileLimits.of(settings).body_limit(settings.max_body_bytes))


def tune_collector() -> None:
    """Once a host has started, in a process that is its own: the collector off the hot path.

    What start-up built lives as long as the process: collections skip it from now on.
    A request allocates thousands of short-lived containers; collecting the young
    generation every 50,000 instead of every 700 keeps the collector off the hot path
    (measured: +20 % blocking sends at c=32, p99 halved) for a few MB of young garbage.
    """
    gc.set_threshold(50_000, 20, 100)
    gc.freeze()


class Server(uvicorn.Server):
    """uvicorn's server, silent at rest; asked to exit, it ends open streams and shuts down gracefully.

    uvicorn wakes ten times a second to refresh its Date header and look for an exit
    request; on these machines every wake-up of an idle process costs milliseconds,
    which alone is over 1 % of a core. This one never wakes on its own: ``DateHeader``
    stamps responses, and ``request_exit`` (a signal, or another thread) sets an event
    that ends the main loop. In the main thread it handles SIGTERM and SIGINT itself.

    ``long_lived``: the process is this host's own, so once started the collector is
    tuned for it (see ``main_loop``); a host embedded in another program leaves it be.
    """

    def __init__(
        self, config: uvicorn.Config, endpoint: A2AEndpoint, guard: LifespanGuard, *, long_lived: bool = True
    ) -> None:
        super().__init__(config)
        self.endpoint = endpoint
        #: holds why start-up failed, if it did
        self.guard = guard
        #: seconds between turning /readyz 503 and shutting down (--drain-seconds)
        self.drain_seconds = 0.0
        self.long_lived = long_lived
        #: every socket it serves: the host's, and --metrics-port's if any
        self.listening: list[socket.socket] = []
        #: set once the server serves, for a caller in another thread
        self.serving = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit_requested: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._exit_requested = asyncio.Event()
        if self.long_lived:
            tune_collector()
        self.serving.set()
        if not await self.on_tick(0):
            await self._exit_requested.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Streams never end on their own; ended now, their responses complete and the
        # server need not wait out its graceful timeout (clients re-attach with Last-Event-ID).
        # First no longer ready, while still serving: a balancer stops sending before anything closes.
        self.endpoint.app.state.readiness.draining()
        if self.drain_seconds > 0 and self.started:
            log.info("draining for %g s before shutting down (/readyz answers 503)", self.drain_seconds)
            await asyncio.sleep(self.drain_seconds)
        logs: RunLogs | None = getattr(self.endpoint.app.state, "logs", None)
        if logs is not None:
            logs.stop()
        feed: RunFeed | None = getattr(self.endpoint.app.state, "run_feed", None)
        if feed is not None:
            feed.stop()
        await super().shutdown(sockets)

    def request_exit(self) -> None:
        """From any thread: leave the main loop and shut down gracefully."""
        self.should_exit = True
        if self._loop is not None and self._exit_requested is not None:
            self._loop.call_soon_threadsafe(self._exit_requested.set)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self.request_exit()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals are the main thread's: an embedding program stops this one with request_exit
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def make_server(
    settings: Settings, *, long_lived: bool = True, lines: InfoLines | None = None
) -> tuple[Server, socket.socket, Settings]:
    """The server of a host built from ``settings``, its listening socket, and the settings as bound.

    The socket is bound first (port 0 picks one; connections wait in the backlog while the
    lifespan starts up), so the settings returned carry the real port, which the app's
    links and agent card use. The app it serves is :func:`host_app`'s.
    """
    sock = _listen(settings.host, settings.port)
    settings = replace(settings, port=sock.getsockname()[1])
    metrics_sock = None
    if settings.metrics_port is not None:
        metrics_sock = _listen(settings.host, settings.metrics_port)
        settings = replace(settings, metrics_port=metrics_sock.getsockname()[1])
    guard, endpoint = host_app(settings, lines)
    config = uvicorn.Config(
        guard,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        # Longer than the idle expiry of the client pools that call hosts (httpx's is 5 s, uvicorn's own
        # default): with the two equal, a request sent on a connection as the host closes it is reset.
        timeout_keep_alive=settings.idle_timeout,
        lifespan="on",
        date_header=False,  # DateHeader and the A2A endpoint stamp it, with no 10 Hz tick
        server_header=False,  # no need to tell strangers what serves them
        proxy_headers=False,  # every URL Tether gives out comes from --public-url, never X-Forwarded-*
        log_config=None,  # ``serve`` configures logging (--log-level, --log-format); an embedder keeps its own
        ssl_certfile=str(settings.tls_certfile) if settings.tls_certfile else None,
        ssl_keyfile=str(settings.tls_keyfile) if settings.tls_keyfile else None,
    )
    server = Server(config, endpoint, guard, long_lived=long_lived)
    server.drain_seconds = settings.drain_seconds
    server.listening = [sock, *([metrics_sock] if metrics_sock is not None else [])]
    return server, sock, settings


def host_app(settings: Settings, lines: InfoLines | None = None) -> tuple[LifespanGuard, A2AEndpoint]:
    """The whole ASGI app of a host, as any ASGI server would run it, and the A2A endpoint inside it.

    Outermost first: the lifespan guard (a failed start-up becomes one line), the probes
    (``/healthz``, ``/readyz``), ``/metrics``, then the request log and metrics around
    everything else, so probes and scrapes are neither logged nor counted. The endpoint is
    returned too: its app's state is what a server's shutdown drains (readiness, open streams).
    """
    endpoint = build_app(settings, lines)
    state = endpoint.app.state
    observed = MetricsEndpoint(
        Observed(endpoint, state.metrics, lines), state.metrics, lambda: state.store, port=settings.metrics_port
    )
    probed = HealthEndpoints(observed, state.readiness)
    return LifespanGuard(probed, debug=settings.log_level == "debug"), endpoint


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket (port 0 picks one); bound before start-up, so connections wait in the backlog."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def serve(settings: Settings) -> None:
    """Run the host until SIGTERM or SIGINT (graceful: in-flight state is already on disk).

    A host that cannot start prints one line saying why and what to do, and exits 3
    (a traceback too with ``--log-level debug``).
    """
    lines = configure_logging(settings.log_level, settings.log_format)
    quiet_uvicorn_startup_failure()
    if tracing.set_up():
        log.info("traces: exporting spans over OTLP/HTTP (the OTEL_* variables say where)")
    try:
        server, sock, _ = make_server(settings, lines=lines)
    except OSError as exc:
        _refuse(explain(exc, host=settings.host, port=settings.port), exc, settings)
    try:
        server.run(sockets=server.listening)
    except SystemExit:
        failure = server.guard.failure
        if failure is None:
            raise
        _refuse(explain(failure), failure, settings)
    finally:
        tracing.shut_down()  # export what is left: a graceful stop loses no span


def _refuse(line: str, cause: BaseException, settings: Settings) -> NoReturn:
    if settings.log_level == "debug":
        log.error("start-up failed", exc_info=cause)
    status = EXIT_STARTUP_FAILED
    HostLines(settings.log_format).say(
        "start-up-failed", line, text=f"error: {line}", level="error", stream=sys.stderr, exit_status=status
    )
    raise SystemExit(status)
