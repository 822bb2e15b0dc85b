"""The ``/goal`` and ``/plan`` commands on a hosted agent, for frontends (the terminal's command list).

Each answers ``{kind: success|error, text}`` for the human; a profile without the feature answers an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.agent.keys import AGENT_PRESETS
from pydsh.goals.command import run_goal_command
from pydsh.goals.keys import GOALS
from pydsh.plan.mode import PLAN_MODE

if TYPE_CHECKING:
    from pydsh.host.agent import Agent


def goal_command(agent: Agent, raw: str) -> dict[str, str]:
    """Run ``/goal <raw>`` on the agent's session."""
    live = agent.live
    goals = live.ctx.get(GOALS)
    if goals is None:
        return {"kind": "error", "text": "Goals are not part of this profile."}
    return run_goal_command(goals, live, raw)


def plan_command(agent: Agent, raw: str) -> dict[str, str]:
    """Run ``/plan <raw>`` on the agent's session (the plan-mode row may sit in the agent's preset)."""
    live = agent.live
    roster = live.ctx.get(AGENT_PRESETS)
    mode = roster.service_for(live, PLAN_MODE) if roster is not None else None
    mode = mode or live.ctx.get(PLAN_MODE)
    if mode is None:
        return {"kind": "error", "text": "Plan mode is not part of this profile."}
    return mode.command(live, raw)
