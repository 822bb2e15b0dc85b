"""The ``sdk-server`` plugin: ``pydsh --profile sdk`` serves SDK clients over stdio JSON-RPC (spec 06).

When its row activates it takes fd 1 for frames (``sys.stdout`` and fd 1 itself then point at stderr),
starts reading stdin, and provides the ``app`` service, which serves requests once the composition has
settled (``server.py``); every session event, status change and subagent edge of the process is
forwarded as a notification through the one writer (``notify.py``).
"""

from __future__ import annotations

import asyncio

from pydsh.agent.keys import AGENTS
from pydsh.apps.sdk.server import HELP, Config, SdkServer
from pydsh.apps.stdio import StdinReader, frame_writer
from pydsh.host.keys import APP
from pydsh.kernel.context import Context
from pydsh.llm.keys import LLM
from pydsh.session.keys import SESSIONS

__all__ = ["HELP", "Config", "SdkServer", "apply", "inject", "name"]

name = "sdk-server"
inject = (AGENTS, SESSIONS, LLM)


async def apply(ctx: Context, config: Config) -> None:
    """Take over stdio, start reading requests, and provide the ``app`` service."""
    server: SdkServer | None = None

    def output_lost() -> None:
        if server is not None:
            server.on_input_closed()

    writer = await frame_writer(ctx, output_lost)
    server = SdkServer(ctx, config, writer, StdinReader())
    pump = asyncio.ensure_future(server.pump())
    ctx.register(pump.cancel)
    ctx.provide(APP, server)
