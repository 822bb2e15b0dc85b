"""Semantic checkpoints: flush the log where losing its tail would hurt (spec 02 §9.6).

Before every model call (the logged request prefix is durable), before every top-level tool
body, and at every step boundary. A failed flush fails closed: no call, no body.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydsh.agent.hooks import PRE_STEP, PreStep, PreStepDecision
from pydsh.contract.tools import TOOL_EXECUTE, ToolExec, ToolOutcome
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.llm.hooks import LLM_STREAM
from pydsh.llm.types import StreamChunk
from pydsh.session.keys import SESSIONS

LISTENER = "session-checkpoint-policy"

name = "session-checkpoint-policy"
inject = (SESSIONS,)


def apply(ctx: Context, config: None) -> None:
    """Flush before model calls, top-level tool bodies and steps."""
    sessions = ctx.require(SESSIONS)

    async def before_model_call(
        options: dict[str, Any], nxt: Next[AsyncIterator[StreamChunk] | None]
    ) -> AsyncIterator[StreamChunk] | None:
        session = sessions.get(options.get("sessionId") or "")
        if session is not None:
            await sessions.flush(session)
        return await nxt()

    async def before_tool_body(call: ToolExec, nxt: Next[ToolOutcome]) -> ToolOutcome:
        if call.parent_call_id is None and call.session is not None:
            await sessions.flush(call.session)
        return await nxt()

    async def before_step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        await sessions.flush(payload["agent"].session)
        return await nxt()

    ctx.on(LLM_STREAM, before_model_call, name=LISTENER)
    ctx.on(TOOL_EXECUTE, before_tool_body, name=LISTENER)
    ctx.on(PRE_STEP, before_step, name=LISTENER)
