"""A2A 1.0: the PascalCase methods in ProtoJSON, over JSON-RPC and over HTTP+JSON (and the 1.1 draft on top).

Both bindings call the same methods: JSON-RPC through :mod:`tether.a2a.jsonrpc` (shared
with 0.3), HTTP+JSON through its own routes under ``/v1/a2a/rest``.

- ``methods``: the 1.0 codec (:class:`~tether.a2a.v1_0.methods.V10Codec`): the method table, generations included
- ``protojson``: ProtoJSON both ways, between 1.0's wire and the canonical shapes
- ``http_json``: the HTTP+JSON binding: routes, params from path, query and body, Status errors
- ``bound``: the same methods on ``/a2a``, the interface the OpenWOP v2 root advertises: task ids bound run ids
"""
