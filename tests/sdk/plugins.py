"""Test plugins loaded by patch rows (``name: tests.sdk.plugins:<function>``)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

from pydsh.agent.keys import AGENTS
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolExec
from pydsh.kernel.context import Context
from pydsh.llm.hooks import LLM_STREAM
from pydsh.session.events import Event
from pydsh.session.hooks import SESSION_EVENT
from pydsh.session.log import Session


def printer(ctx: Context, config: None) -> None:
    """Calls ``print("x")`` at every turn start: stray stdout output during a turn."""

    def on_event(session: Session, event: Event) -> None:
        if event["type"] == "turn/start":
            print("x")

    ctx.on(SESSION_EVENT, on_event)


def disposer(ctx: Context, config: None) -> None:
    """Disposes an agent whose prompt is ``[[dispose]]``: an agent ending outside the SDK server."""
    tasks: set[asyncio.Task[Any]] = set()

    def on_event(session: Session, event: Event) -> None:
        data = event["data"]
        if event["type"] == "user/message" and data["content"] == [{"type": "text", "text": "[[dispose]]"}]:
            task = asyncio.get_running_loop().create_task(dispose(session.id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def dispose(session_id: str) -> None:
        await ctx.require(AGENTS).handle(session_id).dispose()
        print(f"disposed {session_id}", file=sys.stderr, flush=True)

    ctx.on(SESSION_EVENT, on_event)


def stubborn_tool(ctx: Context, config: None) -> None:
    """Registers ``stubborn``, a tool that ignores cancellation: a teardown that cannot finish."""

    async def stubborn(args: Any, exec: ToolExec) -> str:
        print("stubborn: started", file=sys.stderr, flush=True)
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue

    schema = {"type": "object", "properties": {}}
    ctx.require(TOOLS).register(ctx, ToolDefinition("stubborn", "Never returns.", schema, stubborn))


stubborn_tool.inject = (TOOLS,)  # type: ignore[attr-defined]


STREAM_DELTAS = 100_000
STREAM_BLOCK = 1_000


def streaming_model(ctx: Context, config: None) -> None:
    """Answers every model call with ``STREAM_DELTAS`` one-character text deltas as fast as they are
    pulled, reporting ``pulled <n>`` on stderr every ``STREAM_BLOCK``: a model that outruns any client."""

    async def serve(options: dict[str, Any], nxt: Any) -> AsyncIterator[dict[str, Any]]:
        return long_reply()

    ctx.on(LLM_STREAM, serve)


async def long_reply() -> AsyncIterator[dict[str, Any]]:
    """Text blocks of ``STREAM_BLOCK`` deltas each (short blocks keep the assembled text cheap)."""
    for index in range(STREAM_DELTAS // STREAM_BLOCK):
        print(f"pulled {index * STREAM_BLOCK}", file=sys.stderr, flush=True)
        yield {"type": "block-start", "index": index, "blockType": "text"}
        for _ in range(STREAM_BLOCK):
            yield {"type": "text-delta", "index": index, "text": "a"}
        yield {"type": "block-end", "index": index, "block": {"type": "text", "text": "a" * STREAM_BLOCK}}
    yield {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": STREAM_DELTAS, "totalTokens": 0}}
    yield {"type": "finish", "reason": {"kind": "stop"}}
