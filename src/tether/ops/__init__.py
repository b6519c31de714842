"""What an operator runs a host with: start-up that explains itself, health probes, logs, metrics.

Nothing here decides anything about runs; it watches the host the composition root built.
"""
