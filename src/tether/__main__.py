"""``python -m tether``: the ``tether`` command."""

from tether.cli.main import main

main()
