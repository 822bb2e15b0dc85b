"""A plugin module whose import calls ``sys.exit(7)`` (for the degrade-alone test)."""

import sys

sys.exit(7)
