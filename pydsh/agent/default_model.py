"""The default route: fills a missing provider/model into every request config (spec 03 §6.2)."""

from __future__ import annotations

from typing import Any

from pydsh.agent.hooks import AGENT_REQUEST, StepRequest
from pydsh.agent.keys import AGENT_DEFAULT_MODEL
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    provider: str = "deepseek-official"
    model: str = "deepseek-v4-flash"


class DefaultModel:
    """The ``agent_default_model`` service."""

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model

    def current_selection(self) -> dict[str, str]:
        return {"provider": self.provider, "model": self.model}


name = "agent-default-model"


def apply(ctx: Context, config: Config) -> None:
    service = DefaultModel(config.provider, config.model)
    ctx.provide(AGENT_DEFAULT_MODEL, service)

    async def fill(payload: StepRequest, nxt: Next[dict[str, Any]]) -> dict[str, Any]:
        proposed = dict(await nxt())
        if not proposed.get("provider"):
            proposed["provider"] = service.provider
        if not proposed.get("model") and proposed["provider"] == service.provider:
            proposed["model"] = service.model
        return proposed

    ctx.on(AGENT_REQUEST, fill, name="agent-default-model")
