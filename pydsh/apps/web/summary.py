"""What the sidebar and the usage footer need of one live session, folded from its events (spec 12 §4.1).

The counters, route, permission preset and title are the session layer's :class:`SummaryFold` (the
session index keeps the same fold for stored logs); the page's fold adds the to-do list and the goal.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from pydsh.goals.state import CHANGE, EMPTY, GoalState, apply_goal_event
from pydsh.session.events import Event
from pydsh.session.summary import Fallback, SummaryFold


def workspace_id(path: str) -> str:
    """A stable id of a workspace folder (the first 16 hex digits of its path's SHA-256)."""
    return hashlib.sha256(path.encode()).hexdigest()[:16]


@dataclass
class SessionFold(SummaryFold):
    """:class:`SummaryFold` plus the latest ``todo/write`` list (the session view's to-dos) and the goal."""

    todos: list[dict[str, Any]] = field(default_factory=list)
    goal: GoalState = EMPTY
    """The goal fold of :mod:`pydsh.goals.state`: the header's goal chip, for a stored log as for a live one."""

    def reads(self, etype: str) -> bool:
        """The summary's data-bearing types, ``todo/write``, ``goal/change`` and, once a goal exists, prompts
        (an automatic round's prompt counts the round)."""
        if etype in ("todo/write", CHANGE) or (etype == "user/message" and self.goal.goal is not None):
            return True
        return super().reads(etype)

    def apply(self, event: Event, fallback: Fallback | None = None) -> None:
        """Advance the summary, and keep the latest to-do list and the goal."""
        etype = event["type"]
        if etype == "user/message" and not super().reads(etype):
            fallback = None  # read for the goal only: the title's first prompt is already chosen
        super().apply(event, fallback)
        if etype == "todo/write":
            self.todos = list(event["data"].get("todos") or [])
        elif etype in ("user/message", CHANGE):
            self.goal = apply_goal_event(self.goal, event)


def fold_events(events: list[Event]) -> SessionFold:
    """The fold of a whole event list (a stored session read for the agents tree or the session view)."""
    fold = SessionFold()
    for event in events:
        fold.apply(event)
    return fold
