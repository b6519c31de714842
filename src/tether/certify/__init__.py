"""Tether's own check of the OpenWOP v2 profiles' floors, and the signed bundle v3 that states what held.

It is not the official conformance suite (which cannot run here) and never says it is:
the bundle names its suite ``tether-certify`` and its evidence tier ``self``. One module
per profile holds that profile's floor files as checks (``discovery_core``,
``core_standard`` with ``core_streams``, ``seams``); ``ledger`` is what a check asserts
with and the row it leaves; ``session`` is the rig (URL, keys, schemas, receiver);
``runner`` runs them and judges each profile; ``bundle`` digests, signs and verifies;
``_receiver`` is the webhook receiver certify can run, ``_provider`` the effect provider.
"""

from tether.certify._receiver import ScopedReceiver
from tether.certify.bundle import verify
from tether.certify.ledger import Check, Leg, Row
from tether.certify.runner import CHECKS, Build, certify, run_checks
from tether.certify.session import SchemaDir, Session

__all__ = [
    "CHECKS",
    "Build",
    "Check",
    "Leg",
    "Row",
    "SchemaDir",
    "ScopedReceiver",
    "Session",
    "certify",
    "run_checks",
    "verify",
]
