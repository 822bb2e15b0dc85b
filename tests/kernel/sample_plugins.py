"""Plugins used by the kernel tests, resolved by dotted path."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from pydsh.kernel import Context, Service

LOG: list[str] = []


class EchoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    word: str = "hi"
    ratio: float = 0.5


def provider(ctx: Context, config: EchoConfig) -> None:
    LOG.append(f"provider:{config.word}")
    ctx.provide("echo", config.word)
    ctx.effect(lambda: lambda: LOG.append("provider:down"))


provider.Config = EchoConfig  # type: ignore[attr-defined]


def consumer(ctx: Context, config: None) -> None:
    LOG.append(f"consumer:{ctx.require('echo')}")
    ctx.effect(lambda: lambda: LOG.append("consumer:down"))


consumer.inject = ("echo",)  # type: ignore[attr-defined]


def exploding(ctx: Context, config: None) -> None:
    ctx.provide("half", object())
    ctx.effect(lambda: lambda: LOG.append("exploding:rollback"))
    raise RuntimeError("start failed")


class Counter(Service):
    def __init__(self, ctx: Context, config: Any) -> None:
        super().__init__(ctx, "counter")
        self.n = 0
        LOG.append("counter:init")

    async def start(self) -> None:
        LOG.append("counter:start")
