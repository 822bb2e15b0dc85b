"""Test helpers shipped with pydsh: the loopback mock model server."""
