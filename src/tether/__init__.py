"""Tether: a host for OpenWOP workflows whose runs are durable A2A tasks."""

__version__ = "0.1.0"
