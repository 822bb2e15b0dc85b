"""The application layer: a loaded composition (:class:`Host`) and the root sessions opened in it (:class:`Agent`).

Every frontend stands on it — the SDK server, ``pydsh web``, ``pydsh acp``, ``pydsh headless`` — and it
is the public embedding API that ``import pydsh`` re-exports. Importing it loads no frontend, no wire
protocol and no pydantic; each name loads its module on first use (PEP 562), so the command line's
launcher pays only for what it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh import lazy_names

if TYPE_CHECKING:
    from pydsh.host.agent import Agent, Input, Mode
    from pydsh.host.errors import HostError
    from pydsh.host.events import (
        AgentEvent,
        AssistantMessage,
        ReasoningDelta,
        SessionEvent,
        TextDelta,
        ToolCall,
        ToolResult,
        TurnEnd,
    )
    from pydsh.host.host import DEFAULT_PROFILE, AgentSpec, Host, Patch, open_host
    from pydsh.host.run import Receipt, Run, RunResult

_HOME = {
    "Agent": "agent",
    "Input": "agent",
    "Mode": "agent",
    "HostError": "errors",
    "AgentEvent": "events",
    "AssistantMessage": "events",
    "ReasoningDelta": "events",
    "SessionEvent": "events",
    "TextDelta": "events",
    "ToolCall": "events",
    "ToolResult": "events",
    "TurnEnd": "events",
    "DEFAULT_PROFILE": "host",
    "AgentSpec": "host",
    "Host": "host",
    "Patch": "host",
    "open_host": "host",
    "Receipt": "run",
    "Run": "run",
    "RunResult": "run",
}
__all__ = [
    "DEFAULT_PROFILE",
    "Agent",
    "AgentEvent",
    "AgentSpec",
    "AssistantMessage",
    "Host",
    "HostError",
    "Input",
    "Mode",
    "Patch",
    "ReasoningDelta",
    "Receipt",
    "Run",
    "RunResult",
    "SessionEvent",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "TurnEnd",
    "open_host",
]


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name this module is asked for.
    __getattr__ = lazy_names(__name__, _HOME, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
