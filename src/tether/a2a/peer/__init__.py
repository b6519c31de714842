"""Tether as the sending end of a hand-off: the A2A client a hand-off node calls, and the push receiver.

- ``client``: the engine's ``PeerPort`` over the guarded egress client, in A2A 1.0 or 0.3 as the peer's card says
- ``_wire``: the two wires a peer speaks, read into the engine's ``PeerTask``
- ``_files``: files across a hand-off: sent with their bytes, taken back as blobs within limits
- ``receiver``: the peer's pushes (hints, authenticated by a per-hand-off token)
- ``tokens``: the per-hand-off push token, derived from the host key
- ``credentials``: the secrets a hand-off presents, sealed and bound to one origin
"""

from __future__ import annotations

from tether.a2a.peer.client import PeerClient
from tether.a2a.peer.credentials import OutboundCredentials, add_credential, canonical_origin
from tether.a2a.peer.receiver import PushReceiver, router

__all__ = ["OutboundCredentials", "PeerClient", "PushReceiver", "add_credential", "canonical_origin", "router"]
