"""A test plugin: the ``add_route`` tool registers a model route ``late`` while a session runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydsh.contract.tools import TOOLS, ToolDefinition, ToolExec
from pydsh.kernel.context import Context
from pydsh.llm.keys import LLM
from pydsh.llm.types import ModelInfo, ProviderInfo, StreamChunk

name = "late-route"
inject = (TOOLS, LLM)


class LateAdapter:
    """A catalog-only route (never streamed in the tests that use it)."""

    def provider_info(self, provider: str) -> ProviderInfo:
        return {"id": provider, "name": "Late"}

    async def list_models(self, provider: str) -> list[ModelInfo]:
        return [{"provider": provider, "id": "late-1", "name": "Late One"}]

    def stream(self, options: dict[str, Any]) -> AsyncIterator[StreamChunk]:
        raise NotImplementedError("the late route only has a catalog")


def apply(ctx: Context, config: None) -> None:
    async def add_route(args: Any, exec: ToolExec) -> str:
        ctx.require(LLM).register_adapter(ctx, ["late"], LateAdapter())
        return "added"

    schema = {"type": "object", "properties": {}}
    ctx.require(TOOLS).register(ctx, ToolDefinition("add_route", "Adds a model route.", schema, add_route))
