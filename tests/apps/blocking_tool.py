"""A test plugin: the ``block`` tool writes a ready file, then waits until it is killed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydsh.contract.tools import TOOLS, ToolDefinition, ToolExec
from pydsh.kernel.context import Context

name = "blocking-tool"
inject = (TOOLS,)


async def block(args: Any, exec: ToolExec) -> str:
    Path(args["ready"]).write_text("ready")
    await asyncio.sleep(3600)
    return "unreachable"


def apply(ctx: Context, config: None) -> None:
    schema = {"type": "object", "properties": {"ready": {"type": "string"}}, "required": ["ready"]}
    ctx.require(TOOLS).register(ctx, ToolDefinition("block", "Blocks until killed.", schema, block))
