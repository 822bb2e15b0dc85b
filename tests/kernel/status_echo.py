"""A deliberately broken plugin: it re-emits every ``agent/status`` once, so each status is seen twice."""

from __future__ import annotations

from typing import Any

from pydsh.agent.hooks import AGENT_STATUS
from pydsh.kernel.context import Context

name = "status-echo"


def apply(ctx: Context, config: None) -> None:
    echoing = False

    def echo(payload: dict[str, Any]) -> None:
        nonlocal echoing
        if echoing:
            return
        echoing = True
        try:
            ctx.emit(AGENT_STATUS, payload, scope=payload["agent"])
        finally:
            echoing = False

    ctx.on(AGENT_STATUS, echo, global_=True)
