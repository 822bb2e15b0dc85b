"""``python -m pydsh`` is the ``pydsh`` command."""

from pydsh.apps.cli import main

main()
