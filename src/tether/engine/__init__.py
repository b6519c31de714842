"""The workflow engine, which speaks no HTTP and no SQL.

The workflow model and its checks (``workflow``, ``validation``, ``expressions``,
``registry``), what a run is (``state``, ``events``, ``batch``), what happens next
(``scheduler``, ``nodes``, ``interrupts``, ``hitl``), and the durable runner that drives
runs (``engine`` over ``driver``), with leases when hosts share a store (``cluster``),
hand-offs to other agents (``handoff``), the live reads behind streams (``follow``,
``notifier``, ``run_feed``) and retention (``retention``).
"""
