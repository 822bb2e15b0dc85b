"""Semantic checkpoints: flush the log where losing its tail would hurt (spec 02 §9.6).

Before every model call (the logged request prefix is durable), before every top-level tool
body, and at every step boundary. A failed flush fails closed: no call, no body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydsh.kernel.context import Context
from pydsh.kernel.events import define_event
from pydsh.session.log import SessionStore

define_event("llm/stream", "waterfall")
define_event("tools/execute", "waterfall")
define_event("agent/pre-step", "waterfall")

Next = Callable[[], Awaitable[Any]]

name = "session-checkpoint-policy"
inject = ("sessions",)


def apply(ctx: Context, config: None) -> None:
    sessions: SessionStore = ctx.require("sessions")

    async def before_model_call(options: dict[str, Any], nxt: Next) -> Any:
        session = sessions.get(options.get("sessionId") or "")
        if session is not None:
            await sessions.flush(session)
        return await nxt()

    async def before_tool_body(call: Any, nxt: Next) -> Any:
        if getattr(call, "parent_call_id", None) is None and getattr(call, "session", None) is not None:
            await sessions.flush(call.session)
        return await nxt()

    async def before_step(payload: dict[str, Any], nxt: Next) -> Any:
        await sessions.flush(payload["agent"].session)
        return await nxt()

    ctx.on("llm/stream", before_model_call)
    ctx.on("tools/execute", before_tool_body)
    ctx.on("agent/pre-step", before_step)
