"""OpenWOP major 2 on the bare origin, beside major 1 under ``/v1``: the same engine and store, other wire forms.

The v2 routes only translate: ids bound to their tenant at the edge (``ids``), events read
through the v1 → v2 codemap (``eventlog``), the v2 error registry (``errors``); what a run
is, how it is stored and how it moves is the engine's, shared with v1.
"""
