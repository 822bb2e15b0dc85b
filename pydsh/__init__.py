"""pydsh: a light, fast Python implementation of the DeepSeek Harness agent harness.

The embedding API (``pydsh.open_host`` and the event types) loads on first use, so
``import pydsh`` stays as cheap as the command line's start-up needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

    def __getattr__(name: str) -> Any:
        """Load the embedding API on first access (PEP 562)."""
        if name not in _EMBED:
            raise AttributeError(f"module 'pydsh' has no attribute {name!r}")
        value = getattr(importlib.import_module("pydsh.host"), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EMBED})
