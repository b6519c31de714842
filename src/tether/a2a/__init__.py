"""Tether as an A2A v0.3 agent: every run started over A2A is a durable task.

capabilities  what is served (one source for the card, discovery and routing)
skills        which workflows are skills, and which one a message names
card          the agent card
jsonrpc       the JSON-RPC envelope, error codes and responses
params        method params and what a message's parts mean
projection    run → TaskState, Task, stream events and A2ATaskState (one table)
tasks         the durable record: the engine projector and the per-tenant lookup
handlers      the methods, without HTTP
streams       SSE streams read from the run's event log
routes        the HTTP routes (card, /v1/a2a, the task read)
seams         conformance test seams (mounted only with --enable-test-seams)
"""

from tether.a2a.capabilities import A2ACapabilities, a2a_capabilities
from tether.a2a.tasks import project_task_record

__all__ = ["A2ACapabilities", "a2a_capabilities", "project_task_record"]
