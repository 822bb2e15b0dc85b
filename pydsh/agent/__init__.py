"""Agents and the agent loop.

The public model-selection primitive loads on first use, so ``import pydsh.agent`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["ModelSelection", "Route", "install_model_selection"]

if TYPE_CHECKING:
    from pydsh.agent.model_selection import ModelSelection, Route, install_model_selection


def __getattr__(name: str) -> Any:
    """Load the model-selection API on first access (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'pydsh.agent' has no attribute {name!r}")
    value = getattr(importlib.import_module("pydsh.agent.model_selection"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
