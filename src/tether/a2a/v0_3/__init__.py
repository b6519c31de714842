"""A2A 0.3: the slash-named JSON-RPC methods, served when no ``A2A-Version`` is sent.

0.3's shapes are Tether's canonical ones, so this generation parses strictly and
renders as is; it speaks JSON-RPC only (:mod:`tether.a2a.jsonrpc`).

- ``methods``: the 0.3 codec (:class:`~tether.a2a.v0_3.methods.V03Codec`): the method table
- ``params``: the params of the 0.3 methods, checked strictly
"""
