"""The bus events the ``subagents`` package dispatches (the payload keys are the reference's)."""

from __future__ import annotations

from typing import Any, TypedDict

from pydsh.kernel.events import Emit


class SubagentStart(TypedDict):
    """A child agent started on behalf of ``parent_id``."""

    run_id: str
    provider: str
    id: str
    local: bool
    parent_id: str | None


class SubagentEnd(SubagentStart, total=False):
    """A child settled; ``last_assistant_message`` holds the content blocks of its final answer, if any."""

    stop_reason: str
    last_assistant_message: list[dict[str, Any]]


SUBAGENT_START: Emit[SubagentStart] = Emit("subagent/start", "a child agent started")
SUBAGENT_END: Emit[SubagentEnd] = Emit("subagent/end", "a child agent settled")
