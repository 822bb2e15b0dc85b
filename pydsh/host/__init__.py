"""The application layer: a loaded composition (:class:`Host`) and the root sessions opened in it (:class:`Agent`).

Every frontend stands on it — the SDK server, ``pydsh web``, ``pydsh acp``, ``pydsh headless`` — and it
is the public embedding API that ``import pydsh`` re-exports. Importing it loads no frontend, no wire
protocol and no pydantic.
"""

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
