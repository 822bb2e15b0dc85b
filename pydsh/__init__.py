"""pydsh: a light, fast Python implementation of the DeepSeek Harness agent harness.

The embedding API (``pydsh.open_host`` and the event types) loads on first use, so
``import pydsh`` stays as cheap as the command line's start-up needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.lazy import lazy_names

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Agent",
    "AgentEvent",
    "AssistantMessage",
    "Host",
    "HostError",
    "Input",
    "Patch",
    "ReasoningDelta",
    "Run",
    "RunResult",
    "SessionEvent",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "TurnEnd",
    "open_host",
]

_EMBED = frozenset(__all__) - {"__version__"}

if TYPE_CHECKING:
    from pydsh.host import (
        Agent,
        AgentEvent,
        AssistantMessage,
        Host,
        HostError,
        Input,
        Patch,
        ReasoningDelta,
        Run,
        RunResult,
        SessionEvent,
        TextDelta,
        ToolCall,
        ToolResult,
        TurnEnd,
        open_host,
    )


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name this module is asked for.
    __getattr__ = lazy_names(__name__, dict.fromkeys(_EMBED, "pydsh.host"), globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_EMBED})
