"""Tether as an A2A agent (0.3, 1.0, and the 1.1 draft where served): every run started over A2A is a durable task.

The package has the shape of the protocol. The task semantics are version-neutral and live
at the root; each A2A generation is a folder that only translates its wire to and from
them; the endpoint only decides who calls, which binding and which version. Where is the
A2A 1.0 HTTP+JSON binding? ``v1_0/http_json.py``. The map, every module and subpackage:

The version-neutral core (imports no generation, no binding, no endpoint):

- ``service``: the task semantics, once, for every version and binding (no HTTP, no wire shapes)
- ``errors``: the A2A error tree the service and the codecs raise, and the domain-error mapping
- ``message``: the canonical (0.3-shaped) message, the strict params check, what parts mean
- ``projection``: run → TaskState, Task, stream events and A2ATaskState (one table)
- ``tasks``: the durable task record: the engine projector and the per-tenant lookup
- ``files``: file parts at the edge: bytes in as bounded blobs, bytes put back out
- ``streams``: SSE streams read from the run's event log, and how a binding frames them
- ``generations``: task generations (the 1.1 draft): a fold of the durable log
- ``push``: push notification configs, and the pushes a task's transitions cause
- ``calls``: what a method is to the bindings, and who may call it (scopes, the anonymous caller)
- ``capabilities``: what is served (one source for the card, discovery and routing)
- ``versions``: which A2A version a request speaks (``A2A-Version``)
- ``skills``: which workflows are skills, and which one a message names
- ``card``: the agent card (1.0 and 0.3 in one document, and the strict 1.0 one)
- ``surface``: the collaborators the composition root hands in

The generations, each translating its wire to the core and back:

- ``v0_3``: A2A 0.3: its slash-named JSON-RPC methods and their params
- ``v1_0``: A2A 1.0: its PascalCase methods, ProtoJSON, and the HTTP+JSON binding

The wire:

- ``endpoint``: ``POST /v1/a2a``, ``/v1/a2a/rest/…`` and ``POST /a2a`` (v2's) over ASGI: caller, binding, version
- ``jsonrpc``: the JSON-RPC 2.0 binding of both versions (envelope, stream framing, dispatch)
- ``_asgi``: the ASGI plumbing both bindings answer through (head, body limit, answers, streams)
- ``routes``: the REST app's A2A routes (card, task read) and the test seams' router
- ``_seams``: the conformance test seams (mounted only with ``--enable-test-seams``)
- ``_invoke``: the invoke seam, which drives a real hand-off at the suite's peer (seams only too)

The other direction:

- ``peer``: Tether as the sending end of a hand-off: the A2A client, the push receiver, credentials
"""

from tether.a2a.capabilities import A2ACapabilities, a2a_capabilities
from tether.a2a.tasks import project_task_record

__all__ = ["A2ACapabilities", "a2a_capabilities", "project_task_record"]
