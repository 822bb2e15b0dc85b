"""Rows the goal and plan browser tests add to the `pydsh web` they start (the server runs in its own process)."""

from __future__ import annotations

from typing import Any

from pydsh.agent.hooks import AGENT_CREATED, AgentCreated
from pydsh.goals import service as goal_service
from pydsh.plan.mode import RECORD

GOAL_ID = "goal-00000000-0000-4000-8000-000000000007"


def fixed_goal_id(ctx: Any, config: None) -> None:
    """Goal ids are random; the scripted model's update_goal names this one."""
    goal_service.new_goal_id = lambda: GOAL_ID


def plan_mode_at_start(ctx: Any, config: None) -> None:
    """A new session starts in plan mode (the page has no plan switch; the terminal's is /plan)."""

    async def on_created(payload: AgentCreated) -> None:
        if payload.get("source") == "startup":
            payload["agent"].session.append(RECORD, {"active": True})

    ctx.on(AGENT_CREATED, on_created)


FIXED_GOAL_ID = [{"id": "fixed-goal-id", "name": "tests.apps.web.browser.goal_plugins:fixed_goal_id"}]
PLAN_MODE_AT_START = [{"id": "plan-at-start", "name": "tests.apps.web.browser.goal_plugins:plan_mode_at_start"}]
