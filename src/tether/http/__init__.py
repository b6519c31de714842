"""HTTP plumbing both surfaces share: body limits, dates, traceparent, JSON bodies and responses, the error envelope."""
