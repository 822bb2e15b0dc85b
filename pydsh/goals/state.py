"""The goal fold: the current goal of a session, from its ``goal/change`` records and admitted goal rounds.

A ``goal/change`` carries the whole goal after each mutation (``operation: clear`` carries only the
cleared ref); a ``user/message`` whose source is ``{kind: goal, goalId, revision, round}`` is an
admitted round and advances ``roundsStarted``. Both are written as DeepSeek Harness writes them, so a
session's goal folds the same in either runtime. The activation (armed or not) is never logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydsh.session.projections import Wire

if TYPE_CHECKING:
    from pydsh.session.events import Event

CHANGE = "goal/change"
PHASES = ("active", "paused", "blocked", "complete")


@dataclass(frozen=True, slots=True)
class GoalState:
    """The current goal snapshot (``None`` before a create and after a clear) and its counters."""

    goal: dict[str, Any] | None = None
    rounds_started: int = 0
    created_at: int | None = None
    updated_at: int | None = None

    def view(self) -> dict[str, Any] | None:
        """The wire view DeepSeek Harness publishes as the ``goal`` projection."""
        if self.goal is None:
            return None
        return {
            "goal": dict(self.goal),
            "roundsStarted": self.rounds_started,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


EMPTY = GoalState()


def goal_round_source(message: dict[str, Any]) -> dict[str, Any] | None:
    """The ``{kind: goal, …}`` source of an automatic round's prompt, or ``None`` for any other message."""
    source = message.get("source") or {}
    if source.get("kind") == "goal" and isinstance(source.get("round"), int) and source["round"] > 0:
        return dict(source)
    return None


def apply_goal_event(state: GoalState, event: Event) -> GoalState:
    """Fold one committed event; unrelated events return ``state`` itself."""
    etype = event["type"]
    if etype == CHANGE:
        data = event["data"]
        if data.get("operation") == "clear":
            return EMPTY
        return GoalState(dict(data["goal"]), int(data["roundsStarted"]), data["createdAt"], data["updatedAt"])
    if etype == "user/message" and state.goal is not None:
        source = goal_round_source(event["data"])
        goal = state.goal
        if (
            source is not None
            and source.get("goalId") == goal["id"]
            and source.get("revision") == goal["revision"]
            and source["round"] == state.rounds_started + 1
        ):
            return GoalState(goal, source["round"], state.created_at, state.updated_at)
    return state


def check_view(raw: object) -> dict[str, Any] | None:
    """The ``goal`` wire view, checked to be ``None`` or a snapshot with its counters."""
    if raw is None or (isinstance(raw, dict) and isinstance(raw.get("goal"), dict) and "roundsStarted" in raw):
        return raw
    raise TypeError(f"a goal view is null or a goal snapshot, got {raw!r}")


class GoalUnit:
    """The ``goal`` session projection (what SDK clients and the web page read)."""

    key = "goal"
    state_version = 1

    def state_schema(self, raw: object) -> GoalState:
        if isinstance(raw, GoalState):
            return raw
        raise TypeError("goal projection state must be a GoalState")

    def init(self, header: dict[str, Any], inherited_event_count: int) -> GoalState:
        return EMPTY

    def apply(self, state: GoalState, event: Event) -> GoalState:
        return apply_goal_event(state, event)

    @staticmethod
    def _view(state: GoalState) -> dict[str, Any] | None:
        return state.view()

    wire = Wire(view=_view, view_schema=check_view)


class GoalFold:
    """The same fold for ``Session.fold`` (incremental over the in-memory log)."""

    key = "goal"

    def init(self) -> GoalState:
        return EMPTY

    def fold(self, state: GoalState, event: Event) -> GoalState:
        return apply_goal_event(state, event)


GOAL_FOLD = GoalFold()
