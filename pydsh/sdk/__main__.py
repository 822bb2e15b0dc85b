"""``python -m pydsh.sdk [--patch P]...`` is ``pydsh --profile sdk [--patch P]...`` (spec 06 §2.2)."""

import sys

from pydsh.apps.cli import main

sys.exit(main(["--profile", "sdk", *sys.argv[1:]]))
