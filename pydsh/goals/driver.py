"""``goal-round-driver``: while a session's goal is active and armed, each idle agent gets its next round.

When the agent goes idle, the driver first waits for the subagents still running below it (their results
come back as turns of their own), then queues the round prompt as the next turn's input with the source
``{kind: goal, goalId, revision, round}`` (logged as that turn's ``user/message``, which is what
counts the round); once ``maxGoalRounds`` rounds have started it marks the goal blocked with
``round-limit`` instead. A round whose goal changed while it waited is refused at its first step. A
pause from outside the agent's own turn (a human's ``/goal pause``) stops the running turn, its queued
input kept. A round the user stops pauses its goal (logged) once the agent is idle; any other turn the
user stops (``aborted``), one cut off by ``max-tokens`` or one that fails disarms the goal. The prompt
text and these rules are DeepSeek Harness's, so a session continues alike in either runtime.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import AGENT_ERROR, AGENT_STATUS, PRE_STEP, AgentFailed, AgentStatus, PreStep, PreStepDecision
from pydsh.agent.keys import AGENTS
from pydsh.contract.agent import user_message
from pydsh.goals.hooks import GOAL_CHANGED, GoalChanged
from pydsh.goals.keys import GOALS
from pydsh.goals.service import GoalError, GoalService
from pydsh.goals.state import goal_round_source
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.session.hooks import SESSION_EVENT
from pydsh.subagents.keys import SUBAGENTS

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent
    from pydsh.session.events import Event
    from pydsh.session.log import Session

log = logging.getLogger("pydsh.goals")

ROUND_TEXT = (
    "Continue working toward the objective in this same session. Treat the current workspace, tool results, and "
    "durable session state as authoritative; inspect them instead of assuming earlier narration is still current. "
    "Make concrete progress and verify the result. Before claiming completion, gather evidence that the whole "
    "objective is achieved, read the current goal, and mark it complete. If work remains, leave the goal active "
    "for the next round. Follow the configured goal-tool policy before reporting a blocker."
)


def round_prompt(goal: dict[str, Any], round: int) -> str:
    """The continuation prompt of ``round`` (kept in the history the model reads)."""
    objective = json.dumps(goal["objective"], ensure_ascii=False)
    return (
        f"<goal_round>\nObjective: {objective}\nRound: {round}/{goal['maxGoalRounds']}\n\n{ROUND_TEXT}\n</goal_round>"
    )


def drivable(goal: dict[str, Any] | None) -> bool:
    """Whether ``goal`` may get automatic rounds."""
    return goal is not None and goal["phase"] == "active" and goal["activation"] == "armed"


class GoalRoundDriver:
    """Queues rounds at idle and checks them at their first step."""

    def __init__(self, ctx: Context, goals: GoalService) -> None:
        self.ctx = ctx
        self.goals = goals
        self._queued: dict[str, tuple[str, int, int]] = {}
        self._driving: dict[str, asyncio.Task[None]] = {}
        """One drive at a time per agent (one may wait for the agent's subagents)."""
        self._rounds: dict[str, tuple[str, int]] = {}
        """The goal ``(id, revision)`` whose round the agent's open turn runs."""
        self._stopped: dict[str, tuple[str, int]] = {}
        """A round the user stopped: its goal is paused when the agent is idle."""

    def on_status(self, payload: AgentStatus) -> None:
        """At idle, pause the goal of a round the user stopped; once every listener has seen it, queue the next
        round."""
        if payload["status"] == "idle":
            agent = payload["agent"]
            stopped = self._stopped.pop(agent.id, None)
            if stopped is not None:
                self._pause_stopped(agent, stopped)
            asyncio.get_running_loop().call_soon(self.request, agent)

    def _pause_stopped(self, agent: Agent, stopped: tuple[str, int]) -> None:
        """Pause the goal whose round the user stopped, unless it moved on meanwhile."""
        goal = self.goals.get(agent)
        if not drivable(goal) or goal is None or (goal["id"], goal["revision"]) != stopped:
            return
        try:
            self.goals.pause(agent, {"id": goal["id"], "revision": goal["revision"]})
        except GoalError:
            log.warning("goal-round-driver: could not pause the stopped round's goal of %s", agent.id, exc_info=True)
            self.goals.disarm(agent)

    def on_change(self, payload: GoalChanged) -> None:
        """A human's pause stops the running turn; a goal created or resumed while the agent is idle starts its
        round without waiting for a turn."""
        agent = payload["agent"]
        if payload["operation"] == "pause" and agent.status == "running" and not self._own_turn(agent):
            agent.cancel({"kind": "user"}, keep_inbox=True)
        asyncio.get_running_loop().call_soon(self.request, agent)

    def _own_turn(self, agent: Agent) -> bool:
        """Whether the agent itself is doing this (its model's update_goal), which must not stop its turn."""
        agents = self.ctx.get(AGENTS)
        return agents is not None and agents.current_initiator() is agent

    def request(self, agent: Agent) -> None:
        """Start a drive of ``agent`` unless one is under way (it re-reads everything when it goes on)."""
        if agent.id not in self._driving:
            self._driving[agent.id] = asyncio.get_running_loop().create_task(self._drive_once(agent))

    async def _drive_once(self, agent: Agent) -> None:
        try:
            await self.drive(agent)
        except Exception:
            log.warning("goal-round-driver: driving %s failed", agent.id, exc_info=True)
            self.goals.disarm(agent)
        finally:
            self._driving.pop(agent.id, None)

    def stop(self) -> None:
        """Cancel the drives under way (the plugin unloads)."""
        for task in self._driving.values():
            task.cancel()

    async def drive(self, agent: Agent) -> None:
        """Queue the next round of an idle agent's goal or, with the budget spent, block the goal; first wait
        for the agent's running subagents, whose results it reads before the round."""
        if agent.status != "idle" or not drivable(self.goals.get(agent)):
            return
        subagents = self.ctx.get(SUBAGENTS)
        if subagents is not None and subagents.descendants(agent.id):
            await subagents.wait_for_children(agent)
            if agent.status != "idle":
                return
        goal = self.goals.get(agent)
        if not drivable(goal):
            return
        assert goal is not None
        round = goal["roundsStarted"] + 1
        if self._queued.get(agent.id) == (goal["id"], goal["revision"], round):
            return
        ref = {"id": goal["id"], "revision": goal["revision"]}
        if goal["roundsStarted"] >= goal["maxGoalRounds"]:
            message = f"Goal reached its configured limit of {goal['maxGoalRounds']} rounds."
            self.goals.block(agent, ref, {"code": "round-limit", "message": message})
            return
        source = {"kind": "goal", "goalId": goal["id"], "revision": goal["revision"], "round": round}
        self._queued[agent.id] = (goal["id"], goal["revision"], round)
        agent.followup(user_message([{"type": "text", "text": round_prompt(goal, round)}], source))

    async def on_pre_step(self, payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        """Refuse a round whose goal moved on while it waited; a valid round starts a request series."""
        source = next((s for s in map(goal_round_source, payload["messages"]) if s is not None), None)
        if source is None:
            return await nxt()
        agent = payload["agent"]
        self._queued.pop(agent.id, None)
        goal = self.goals.get(agent)
        current = drivable(goal) and goal is not None and (goal["id"], goal["revision"], goal["roundsStarted"] + 1)
        if current != (source.get("goalId"), source.get("revision"), source["round"]):
            return {"kind": "reject"}
        decision = await nxt()
        if decision["kind"] == "reject":
            return decision
        self._rounds[agent.id] = (source["goalId"], source["revision"])
        return {**decision, "startsRequestSeries": True}

    def on_event(self, session: Session, event: Event) -> None:
        """A round the user stopped pauses its goal at idle; any other stopped turn, or one cut off by the token
        limit, disarms the goal."""
        agent = self._agent(session) if event["type"] == "turn/end" else None
        if agent is None:
            return
        round = self._rounds.pop(agent.id, None)
        kind = event["data"]["reason"].get("kind")
        if kind == "aborted" and round is not None:
            self._stopped[agent.id] = round
        elif kind in ("aborted", "max-tokens"):
            self.goals.disarm(agent)

    def on_error(self, payload: AgentFailed) -> None:
        """A failed turn disarms the goal: rounds must not loop on an error."""
        self.goals.disarm(payload["agent"])

    def _agent(self, session: Session) -> Agent | None:
        agents = self.ctx.get(AGENTS)
        agent = agents.get(session.id) if agents is not None else None
        return agent if agent is not None and agent.session is session else None


name = "goal-round-driver"
inject = (GOALS,)


def apply(ctx: Context, config: None) -> None:
    """Listen for idle agents, round prompts at their first step, turn ends and failures."""
    driver = GoalRoundDriver(ctx, ctx.require(GOALS))
    ctx.on(AGENT_STATUS, driver.on_status)
    ctx.on(AGENT_ERROR, driver.on_error)
    ctx.on(GOAL_CHANGED, driver.on_change)
    ctx.on(SESSION_EVENT, driver.on_event)
    ctx.on(PRE_STEP, driver.on_pre_step, name="goal-round-driver")
    agents = ctx.get(AGENTS)
    if agents is not None:
        agents.add_keeper(ctx, lambda agent: drivable(driver.goals.get(agent)))  # drivable: active and armed here
    ctx.effect(lambda: driver.stop)
