"""Plugins used by the kernel tests, resolved by dotted path."""

from __future__ import annotations

import asyncio
import sys
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


def exiting(ctx: Context, config: None) -> None:
    ctx.effect(lambda: lambda: LOG.append("exiting:rollback"))
    sys.exit(3)


def stray_cancel(ctx: Context, config: None) -> None:
    """Raises ``CancelledError`` although nothing cancelled the loading task (a plugin's own bug)."""
    raise asyncio.CancelledError


async def cancels_its_loader(ctx: Context, config: None) -> None:
    """Cancels the task that activates it, as a shutdown does while a plugin starts."""
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    await asyncio.sleep(0)


def interrupted(ctx: Context, config: None) -> None:
    raise KeyboardInterrupt


class Counter(Service):
    def __init__(self, ctx: Context, config: Any) -> None:
        super().__init__(ctx, "counter")
        self.n = 0
        LOG.append("counter:init")

    async def start(self) -> None:
        LOG.append("counter:start")
