"""Host settings: one value object built by the CLI (or tests) and handed to the app."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = Path(".tether")
    database_url: str | None = None
    workflows_dir: Path | None = None
    seed_fixtures: Path | None = None
    public_url: str | None = None
    max_body_bytes: int = 1024 * 1024
    default_skill: str = "echo"
    a2a_skills: tuple[str, ...] = ()  # only these workflows are A2A skills (fixtures too); empty: every loaded one
    a2a_request_timeout: float = 30.0
    #: the lowest A2A version a hand-off may speak ("1.0", or "0.3" for legacy peers; then the v2 root has no ``a2a``)
    a2a_minimum_version: str = "1.0"
    a2a_file_part_bytes: int = 8 * 1024 * 1024  # the most bytes one A2A file part may carry inline
    a2a_file_message_bytes: int = 16 * 1024 * 1024  # the most file bytes one A2A message may carry in all
    enable_test_seams: bool = False
    keepalive_seconds: float = 15.0
    interrupt_token_ttl: float = 1800.0
    key_cache_seconds: float = 2.0
    secret_key_file: Path | None = None  # default: <data-dir>/host.key
    lease_seconds: float = 15.0  # several hosts: how long a silent host keeps its runs
    fallback_poll_seconds: float = 5.0  # several hosts: the longest a lost hint delays an event
    egress_allow_cidrs: tuple[str, ...] = ()
    egress_ca_bundle: Path | None = None
    push_retry_schedule: str = "5s,30s,2m,10m,1h,4h,12h"
    delivery_concurrency: int = 16  # deliveries in flight at once to one receiver; a crash may re-send them
    webhook_max_attempts: int = 4  # OpenWOP v2 webhooks: attempts at a delivery, then it is dead-lettered
    webhook_first_retry: float = 1.0  # seconds before a v2 webhook's first retry; each later one waits twice as long
    push_body: str = "status"  # "status": a TaskStatusUpdateEvent; "task": the full Task
    a2a_anonymous_tenant: str | None = None  # a public agent: keyless A2A calls act in this tenant (REST needs a key)
    tls_certfile: Path | None = None  # serve HTTPS with this certificate chain (PEM) and --tls-keyfile
    tls_keyfile: Path | None = None
    handoff_poll_max_seconds: float = 30.0  # the longest a hand-off waits between reads of its peer task
    a2a_conformance_peer_url: str | None = None  # test seams: the peer conformance hand-off nodes call
    test_handoff_pause_file: Path | None = None  # test seams: a hand-off touches it after its send, then waits
    metrics_port: int | None = None  # serve /metrics on this port only, not beside the API (0: any free port)
    drain_seconds: float = 0.0  # on SIGTERM: /readyz answers 503 this long before the host stops serving
    idle_timeout: int = 75  # an HTTP connection idle this long between requests is closed by the host
    log_level: str = "info"  # debug also prints a start-up failure's traceback
    task_retention: float = 30 * 86400.0  # seconds a terminal run is kept; 0 keeps every run forever
    log_format: str = "text"  # "text" for people, "json" (one object per line) for collectors
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def host_key_path(self) -> Path:
        """The host key that signs interrupt tokens and seals secrets (shared by hosts of one database)."""
        return self.secret_key_file if self.secret_key_file is not None else self.data_dir / "host.key"

    @property
    def base_url(self) -> str:
        """The URL callers reach this host at (``--public-url``, else the bind address)."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        scheme = "https" if self.tls_certfile is not None else "http"
        return f"{scheme}://{host}:{self.port}"
