"""A plugin module whose import raises (for the degrade-alone test)."""

raise RuntimeError("this plugin cannot be imported")
