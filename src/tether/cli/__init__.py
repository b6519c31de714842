"""The operator CLI (``tether``): serve the host, manage API keys, inspect and steer runs.

The CLI holds no business logic: key and credential commands call the store and auth
functions directly, run and workflow commands go through the host's REST API like any other
client, so what an operator sees is exactly what the API says.

One module per command group, each a ``click`` group that ``main`` adds to the root:

- ``main``: the root group, its error handling and the console-script entry point
- ``serve``: ``tether serve``, and ``serve_settings`` for embedding the host
- ``keys``, ``credentials``: on the store directly (they work before a first ``serve``)
- ``certify``: the host's own check of the v2 profiles' floors, over its REST API, and a bundle
  signed with the certification key kept in its store (``certify keys`` lists and rotates it)
- ``workflows``, ``runs``, ``push``: on a running host, through its REST API

and what they share:

- ``_reach``: how a command reaches the store (``@on_store``) or the host (``@on_host``)
- ``_client``: the synchronous REST client ``@on_host`` hands out
- ``_output``: exit statuses, one-line errors, ``--json``
- ``_render``: tables and summaries, pure functions of plain data
- ``_live``: the live view of ``runs events --follow`` in a terminal
"""
