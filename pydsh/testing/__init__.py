"""Test helpers shipped with pydsh: a scripted host for your own tests, and the loopback mock model server.

``pydsh.testing.scripted_host(script)`` is an offline, keyless :class:`pydsh.Host`;
``pydsh.testing.mock_model_server.MockModelServer`` exercises the real HTTP adapters.
"""

from pydsh.testing.hosts import SCRIPTED_PROVIDERS, ScriptedHost, scripted_host, scripted_patch

__all__ = ["SCRIPTED_PROVIDERS", "ScriptedHost", "scripted_host", "scripted_patch"]
