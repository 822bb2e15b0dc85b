"""Keys of the services the ``llm`` package provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    import httpx

    from pydsh.llm.scripted import ScriptAdapter
    from pydsh.llm.service import LlmService

LLM: ServiceKey[LlmService] = ServiceKey("llm")
LLM_REPLAY: ServiceKey[ScriptAdapter] = ServiceKey("llm_replay")
LLM_TRANSPORT: ServiceKey[httpx.AsyncBaseTransport] = ServiceKey("llm_transport")
"""An ``httpx`` transport every HTTP adapter sends through when provided (tests, proxies)."""
