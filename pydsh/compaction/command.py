"""``command-compact``: a prompt that is exactly ``/compact`` compacts instead of reaching the model (spec 10 §4.8).

The prompt is claimed and not logged as a message; ``command/run`` and ``command/done`` record it,
and the compaction brackets carry its ``commandId`` as ``sourceCommandId``. The turn then ends
``completed`` with no model call. Headless ``--compact ID`` uses ``compact_now`` instead.
"""

from __future__ import annotations

import logging
from typing import Any

from pydsh.agent.hooks import PRE_STEP, PreStep, PreStepDecision
from pydsh.agent.loop import error_chain
from pydsh.compaction.keys import COMPACTION
from pydsh.contract.agent import text_of
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next

log = logging.getLogger("pydsh.compaction")


COMMAND = "/compact"


def is_compact_command(messages: list[dict[str, Any]]) -> bool:
    """Whether the claimed input is a single user prompt reading ``/compact``."""
    if len(messages) != 1:
        return False
    message = messages[0]
    source = message.get("source") or {}
    return source.get("kind") == "user" and text_of(message).strip() == COMMAND


name = "command-compact"


def apply(ctx: Context, config: None) -> None:
    """Intercept ``/compact`` prompts at the first step of their turn."""

    async def on_pre_step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        messages = payload["messages"]
        if payload["step"] != 1 or not is_compact_command(messages):
            return await nxt()
        agent = payload["agent"]
        session = agent.session
        command_id = messages[0]["id"]
        session.append("command/run", {"commandId": command_id, "name": "compact", "source": {"kind": "user"}})
        engine = ctx.get(COMPACTION)
        done: dict[str, Any] = {"commandId": command_id}
        try:
            if engine is None:
                raise RuntimeError("no compaction engine is mounted for this agent")
            result = await engine.compact_in_turn(agent, payload.get("signal"), command_id)
        except Exception as exc:
            done |= {"kind": "error", "text": f"compaction failed: {error_chain(exc)}"}
            log.warning("/compact failed: %s", error_chain(exc))
        else:
            if result is None:
                done |= {"kind": "success", "text": "nothing to compact"}
            else:
                done |= {
                    "kind": "success",
                    "text": f"compacted {len(result.shadowed_seqs)} messages into a checkpoint",
                    "sourceEventSeq": result.checkpoint_seq,
                }
        session.append("command/done", done)
        return {"kind": "enter", "messages": []}

    ctx.on(PRE_STEP, on_pre_step, name="command-compact")
