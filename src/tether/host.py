"""The collaborators a request handler may use, built once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from tether.auth.keys import KeyVerifier
from tether.egress.service import Egress
from tether.engine.engine import Engine
from tether.engine.follow import RunLogs
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry
from tether.openwop.tokens import TokenSigner
from tether.settings import Settings
from tether.store.base import Store


@dataclass(slots=True)
class Host:
    settings: Settings
    store: Store
    registry: WorkflowRegistry
    notifier: Notifier
    engine: Engine
    verifier: KeyVerifier
    signer: TokenSigner
    egress: Egress
    logs: RunLogs
