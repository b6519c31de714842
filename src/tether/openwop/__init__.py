"""The OpenWOP REST surface: major 1 under ``/v1``, major 2 on the bare origin (``v2``).

Major 1's routes are this package's modules (runs, events, interrupts, webhooks, workflows,
and the runs watch, a Tether extension); major 2's are in ``v2``. Discovery and interrupt
tokens serve both majors, and ``versions`` says which major a request speaks.
"""
