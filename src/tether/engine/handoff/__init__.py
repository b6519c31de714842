"""The hand-off: a workflow node that hands a task to another A2A agent and follows it durably.

- ``follower``: ``Handoffs``, one follower per hand-off in flight on this host: it sends the
  message once, records the peer's task, forwards local answers, reads the peer task on a
  push, a stream event or a poll, and cancels it when the run is cancelled
- ``projection``: the reverse projection, pure: the peer's task state becomes this run's events
- ``negotiation``: which A2A version a hand-off speaks, under the operator's floor, and the
  ``negotiation.decided`` record of each decision
- ``peer``: ``PeerPort``, the other agent as a hand-off sees it, and the plain data it speaks
  (the A2A package implements it)
- ``record``: what the run's state says of its hand-offs (which nodes, in flight, a mirrored
  question) and the names derived from a run and node

Nothing is imported here: import from the module that says what you need.
"""
