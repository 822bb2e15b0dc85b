"""Plugins used by the kernel tests, resolved by dotted path."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict

from pydsh.kernel import Context
from pydsh.kernel.keys import ServiceKey

LOG: list[str] = []


class EchoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    word: str = "hi"
    ratio: float = 0.5


def provider(ctx: Context, config: EchoConfig) -> None:
    LOG.append(f"provider:{config.word}")
    ctx.provide(ServiceKey("echo"), config.word)
    ctx.effect(lambda: lambda: LOG.append("provider:down"))


provider.Config = EchoConfig  # type: ignore[attr-defined]


def consumer(ctx: Context, config: None) -> None:
    LOG.append(f"consumer:{ctx.require(ServiceKey('echo'))}")
    ctx.effect(lambda: lambda: LOG.append("consumer:down"))


consumer.inject = (ServiceKey("echo"),)  # type: ignore[attr-defined]


def exploding(ctx: Context, config: None) -> None:
    ctx.provide(ServiceKey("half"), object())
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


COUNTER: ServiceKey[Counter] = ServiceKey("counter")


class Counter:
    def __init__(self, ctx: Context, config: Any) -> None:
        self.ctx = ctx
        ctx.provide(COUNTER, self)
        self.n = 0
        LOG.append("counter:init")

    async def start(self) -> None:
        LOG.append("counter:start")


def stringly(ctx: Context, config: None) -> None:
    """Names its dependency by a string, which the kernel refuses (dependencies are service keys)."""


stringly.inject = ("echo",)  # type: ignore[attr-defined]
