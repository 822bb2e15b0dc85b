"""A plugin module whose import is interrupted as by Ctrl-C (which must still stop the process)."""

raise KeyboardInterrupt
