"""The fault harness (``pytest -m faults``): its helper modules beside this file, and the A2A hosts' helpers."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for folder in (_HERE, _HERE.parent / "a2a"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
