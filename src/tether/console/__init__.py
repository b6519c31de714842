"""The operator console: a few static files (HTML, CSS, plain ES modules) served at ``/console``.

It holds no business logic and calls no Tether code: the browser talks to the public REST
and A2A endpoints with the operator's API key, so the console can never do what the API
cannot.
"""

from tether.console.routes import router

__all__ = ["router"]
