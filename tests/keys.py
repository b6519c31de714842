"""API keys for tests, made in-process through the ``tether keys create`` command itself.

``made_key`` makes a key once per host and name: the tests that share a host share the
key too, since an active key's name is unique on a host.
"""

from __future__ import annotations

import weakref

from harness import Host
from inproc import create_key

_MADE: weakref.WeakKeyDictionary[Host, dict[tuple[str, ...], str]] = weakref.WeakKeyDictionary()


def made_key(host: Host, name: str, *extra: str) -> str:
    """The key ``tether keys create --name NAME EXTRA...`` made for ``host`` (made on first use)."""
    made = _MADE.setdefault(host, {})
    spec = (name, *extra)
    if spec not in made:
        made[spec] = create_key(host.data_dir, name, *extra)
    return made[spec]
