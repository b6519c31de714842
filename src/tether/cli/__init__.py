"""The operator CLI (``tether``): serve the host, manage API keys, inspect and steer runs.

The CLI holds no business logic: key commands call the store and auth functions directly,
run and workflow commands go through the host's REST API like any other client, so what an
operator sees is exactly what the API says.
"""
