"""The event the goal service dispatches after each logged mutation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from pydsh.kernel.events import Emit

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent


class GoalChanged(TypedDict):
    """One mutation of ``agent``'s goal was logged; ``goal`` is the view after it (``None`` once cleared)."""

    agent: Agent
    operation: str
    goal: dict[str, Any] | None


GOAL_CHANGED: Emit[GoalChanged] = Emit("goal/changed", "a goal mutation was logged")
