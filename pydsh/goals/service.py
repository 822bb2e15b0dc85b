"""The ``goals`` service: compare-and-set mutations of a session's goal, each logged as ``goal/change``.

The durable state is the fold of the log (:mod:`pydsh.goals.state`); only the activation — whether
automatic rounds may run in this process — lives here, and it starts disarmed for every session a
process opens, so a resumed or forked session never continues on its own until a human resumes it.
Error texts and codes are DeepSeek Harness's, since the model reads them in tool results.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from pydsh.contract.tools import ToolError
from pydsh.goals.hooks import GOAL_CHANGED, GoalChanged
from pydsh.goals.keys import GOALS
from pydsh.goals.state import CHANGE, GOAL_FOLD, GoalState, GoalUnit
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.session.keys import SESSION_PROJECTIONS

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent

DEFAULT_MAX_ROUNDS = 256
MAX_SAFE_INTEGER = 2**53 - 1
_KEBAB = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


class GoalError(ToolError):
    """A goal mutation that the current state does not allow; ``code`` is DeepSeek Harness's."""

    error_name = "GoalError"


def new_goal_id() -> str:
    """A fresh goal id, shaped as DeepSeek Harness shapes them."""
    return f"goal-{uuid.uuid4()}"


def max_rounds(value: object) -> int:
    """A positive safe integer round cap."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SAFE_INTEGER:
        raise GoalError("maxGoalRounds must be a positive safe integer", "GOAL_INVALID_MAX_ROUNDS")
    return value


def objective_text(value: object) -> str:
    """A non-empty objective, trimmed."""
    if not isinstance(value, str) or not value.strip():
        raise GoalError("goal objective must be a non-empty string", "GOAL_INVALID_OBJECTIVE")
    return value.strip()


def block_reason(reason: dict[str, Any]) -> dict[str, str]:
    """A ``{code, message}`` blocker: a lower-kebab-case code and a non-empty message."""
    code, message = reason.get("code"), reason.get("message")
    if not isinstance(code, str) or not _KEBAB.match(code) or not isinstance(message, str) or not message.strip():
        raise GoalError(
            "goal block reason requires a lower-kebab-case code and a non-empty message", "GOAL_INVALID_BLOCK_REASON"
        )
    return {"code": code, "message": message.strip()}


def with_phase(goal: dict[str, Any], phase: str) -> dict[str, Any]:
    """The next revision of ``goal`` in ``phase`` (a blocker is dropped)."""
    return {
        "id": goal["id"],
        "revision": goal["revision"] + 1,
        "objective": goal["objective"],
        "phase": phase,
        "maxGoalRounds": goal["maxGoalRounds"],
    }


def transition_error(goal: dict[str, Any], operation: str, allowed: tuple[str, ...]) -> GoalError:
    """The refusal of ``operation`` from the goal's current phase."""
    return GoalError(
        f'cannot {operation} goal "{goal["id"]}" from phase "{goal["phase"]}"; expected {" or ".join(allowed)}',
        "GOAL_INVALID_TRANSITION",
    )


class GoalService:
    """Reads and mutates the goal of a live agent's session."""

    def __init__(self, ctx: Context, default_max_rounds: int) -> None:
        self.ctx = ctx
        self.default_max_rounds = max_rounds(default_max_rounds)
        self._armed: set[str] = set()

    def state(self, agent: Agent) -> GoalState:
        """The folded goal of the agent's session."""
        state: GoalState = agent.session.fold(GOAL_FOLD)
        return state

    def armed(self, agent: Agent) -> bool:
        """Whether automatic rounds may run for this session in this process."""
        return agent.session.id in self._armed

    def get(self, agent: Agent) -> dict[str, Any] | None:
        """The current goal with its counters and activation, or ``None``."""
        return self.view(agent, self.state(agent))

    def view(self, agent: Agent, state: GoalState) -> dict[str, Any] | None:
        """``state``'s goal as callers read it: snapshot, counters, activation."""
        if state.goal is None:
            return None
        activation = "armed" if self.armed(agent) else "disarmed"
        return {
            **state.goal,
            "roundsStarted": state.rounds_started,
            "createdAt": state.created_at,
            "updatedAt": state.updated_at,
            "activation": activation,
        }

    def disarm(self, agent: Agent) -> None:
        """Stop automatic rounds without changing the logged goal."""
        self._armed.discard(agent.session.id)

    def create(self, agent: Agent, objective: object, rounds: object = None) -> dict[str, Any]:
        """Create and arm a goal; only a completed goal (or none) may be replaced."""
        text = objective_text(objective)
        cap = max_rounds(self.default_max_rounds if rounds is None else rounds)
        current = self.state(agent).goal
        if current is not None and current["phase"] != "complete":
            raise GoalError(
                f'goal "{current["id"]}" already exists with phase "{current["phase"]}"', "GOAL_ALREADY_EXISTS"
            )
        now = int(time.time() * 1000)
        goal = {"id": new_goal_id(), "revision": 1, "objective": text, "phase": "active", "maxGoalRounds": cap}
        return self._commit(agent, "create", goal, 0, times=(now, now), armed=True)

    def edit(
        self, agent: Agent, ref: dict[str, Any], objective: object = None, rounds: object = None
    ) -> dict[str, Any]:
        """Replace the objective and/or the round cap, keeping the phase."""
        state = self._expect(agent, ref)
        if objective is None and rounds is None:
            raise GoalError("goal edit requires objective and/or maxGoalRounds", "GOAL_INVALID_EDIT")
        goal = {**self._goal(state), "revision": self._goal(state)["revision"] + 1}
        if objective is not None:
            goal["objective"] = objective_text(objective)
        if rounds is not None:
            goal["maxGoalRounds"] = max_rounds(rounds)
        return self._commit_current(agent, state, "edit", goal, armed=self.armed(agent))

    def pause(self, agent: Agent, ref: dict[str, Any]) -> dict[str, Any]:
        """Pause an active goal and disarm it."""
        return self._transition(agent, ref, "pause", ("active",), "paused", armed=False)

    def resume(self, agent: Agent, ref: dict[str, Any]) -> dict[str, Any]:
        """Resume a paused or blocked goal, or rearm an active one after a restart, while budget remains."""
        state = self._expect(agent, ref)
        goal = self._goal(state)
        allowed = ("active", "paused", "blocked")
        if goal["phase"] not in allowed:
            raise transition_error(goal, "resume", allowed)
        if goal["phase"] == "active" and self.armed(agent):
            raise GoalError(f'goal "{goal["id"]}" is already active and armed', "GOAL_INVALID_TRANSITION")
        if state.rounds_started >= goal["maxGoalRounds"]:
            raise GoalError(
                f'goal "{goal["id"]}" exhausted {goal["maxGoalRounds"]} goal rounds; '
                "increase maxGoalRounds before resuming",
                "GOAL_INVALID_TRANSITION",
            )
        return self._commit_current(agent, state, "resume", with_phase(goal, "active"), armed=True)

    def complete(self, agent: Agent, ref: dict[str, Any]) -> dict[str, Any]:
        """Mark a goal that is not yet complete as complete."""
        return self._transition(agent, ref, "complete", ("active", "paused", "blocked"), "complete", armed=False)

    def block(self, agent: Agent, ref: dict[str, Any], reason: dict[str, Any]) -> dict[str, Any]:
        """Mark an active goal blocked with a ``{code, message}`` reason."""
        state = self._expect(agent, ref)
        goal = self._goal(state)
        if goal["phase"] != "active":
            raise transition_error(goal, "block", ("active",))
        blocked = {**with_phase(goal, "blocked"), "blockedReason": block_reason(reason)}
        return self._commit_current(agent, state, "block", blocked, armed=False)

    def clear(self, agent: Agent, ref: dict[str, Any]) -> dict[str, Any]:
        """Clear the goal, logging a tombstone one revision past it."""
        state = self._expect(agent, ref)
        goal = self._goal(state)
        tombstone = {"id": goal["id"], "revision": goal["revision"] + 1}
        change = {
            "kind": CHANGE,
            "version": 1,
            "operation": "clear",
            "cleared": tombstone,
            "clearedAt": self._next_time(state),
        }
        self._append(agent, change, armed=False)
        return tombstone

    # -- internals ---------------------------------------------------------------------------

    def _goal(self, state: GoalState) -> dict[str, Any]:
        assert state.goal is not None
        return state.goal

    def _expect(self, agent: Agent, ref: dict[str, Any]) -> GoalState:
        state = self.state(agent)
        goal = state.goal
        if goal is None:
            raise GoalError("no current goal", "GOAL_NOT_FOUND")
        if ref.get("id") != goal["id"] or ref.get("revision") != goal["revision"]:
            raise GoalError(
                f'stale goal ref "{ref.get("id")}" revision {ref.get("revision")}; '
                f'current is "{goal["id"]}" revision {goal["revision"]}',
                "GOAL_STALE_REVISION",
            )
        return state

    def _transition(
        self, agent: Agent, ref: dict[str, Any], operation: str, allowed: tuple[str, ...], phase: str, *, armed: bool
    ) -> dict[str, Any]:
        state = self._expect(agent, ref)
        goal = self._goal(state)
        if goal["phase"] not in allowed:
            raise transition_error(goal, operation, allowed)
        return self._commit_current(agent, state, operation, with_phase(goal, phase), armed=armed)

    @staticmethod
    def _next_time(state: GoalState) -> int:
        return max(int(time.time() * 1000), state.updated_at or 0)

    def _commit_current(
        self, agent: Agent, state: GoalState, operation: str, goal: dict[str, Any], *, armed: bool
    ) -> dict[str, Any]:
        created = state.created_at or 0
        times = (created, self._next_time(state))
        return self._commit(agent, operation, goal, state.rounds_started, times=times, armed=armed)

    def _commit(
        self,
        agent: Agent,
        operation: str,
        goal: dict[str, Any],
        rounds: int,
        *,
        times: tuple[int, int],
        armed: bool,
    ) -> dict[str, Any]:
        created, updated = times
        change = {
            "kind": CHANGE,
            "version": 1,
            "operation": operation,
            "goal": goal,
            "roundsStarted": rounds,
            "createdAt": created,
            "updatedAt": updated,
        }
        self._append(agent, change, armed=armed)
        view = self.get(agent)
        assert view is not None
        return view

    def _append(self, agent: Agent, change: dict[str, Any], *, armed: bool) -> None:
        agent.session.append(CHANGE, change)
        if armed:
            self._armed.add(agent.session.id)
        else:
            self._armed.discard(agent.session.id)
        payload = GoalChanged(agent=agent, operation=change["operation"], goal=self.get(agent))
        self.ctx.emit(GOAL_CHANGED, payload, scope=agent)


class Config(BaseModel):
    """``defaultMaxGoalRounds``: the round cap of a goal created without one."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    defaultMaxGoalRounds: int = Field(DEFAULT_MAX_ROUNDS, ge=1, le=MAX_SAFE_INTEGER)


name = "goals"


def apply(ctx: Context, config: Config) -> None:
    """Provide the service and publish the ``goal`` projection to clients."""
    ctx.provide(GOALS, GoalService(ctx, config.defaultMaxGoalRounds))
    projections = ctx.get(SESSION_PROJECTIONS)
    if projections is not None:
        projections.register(ctx, GoalUnit())
