"""Fixtures of the plugin's tests: pydsh's own (an isolated ``DSH_HOME``, invariant violations fail the test)."""

from pydsh.testing.fixtures import isolated_home, violations

__all__ = ["isolated_home", "violations"]
