"""pydsh: a light, fast Python implementation of the DeepSeek Harness agent harness.

The embedding API (``pydsh.open_host`` and the event types) loads on first use, so
``import pydsh`` stays as cheap as the command line's start-up needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
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


def lazy_names(package: str, homes: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package``: a name of ``homes`` is imported from
    ``package.<its home>`` (or from the home itself when it is an absolute module name) and kept in
    ``namespace``. Packages whose names load on first use share it; it lives here because importing
    ``pydsh`` must import nothing else."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = home if "." in home else f"{package}.{home}"
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return load


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name this module is asked for.
    __getattr__ = lazy_names(__name__, dict.fromkeys(_EMBED, "pydsh.host"), globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_EMBED})
