"""``tool-goal``: the model's ``get_goal``, ``create_goal`` and ``update_goal``, and the goal policy section.

Names, schemas, result JSON and error texts are DeepSeek Harness's; descriptions are our own words.
Who may do what: creating, editing, pausing and resuming need a human's prompt in the current turn
of a top-level agent; completing and blocking may also happen inside the goal's own automatic
round, and blocking there waits for ``blockedAfterConsecutiveRounds`` rounds. Completing or blocking
from a round adds a closing instruction after the result, so the model writes to the user once more.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.agent.prompt import SECTION_ORDER
from pydsh.contract.agent import user_message
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec, ToolOutcome, text
from pydsh.goals.keys import GOALS
from pydsh.goals.service import GoalService
from pydsh.goals.state import goal_round_source
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent

ACTIONS = ["edit", "pause", "resume", "complete", "blocked"]
CREATE_DESCRIPTION = (
    "Start a goal that is kept in the session log and keeps this session working through automatic "
    "continuation rounds. Call it when the human's direct request is a long-running objective, even without "
    'the word "goal"; do not call it for work that fits in one turn.'
)
GET_DESCRIPTION = "Return the session's current goal with the id and revision that update_goal needs."
UPDATE_DESCRIPTION = "Change the current goal."
CREATE_PARAMETERS = {
    "type": "object",
    "properties": {
        "objective": {"type": "string", "description": "What counts as done, taken from the human's direct request."},
        "max_goal_rounds": {
            "type": "number",
            "description": "Optional cap on the number of automatic continuation rounds (a positive whole number).",
        },
    },
    "required": ["objective"],
}
GET_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
UPDATE_PARAMETERS = {
    "type": "object",
    "properties": {
        "goal_id": {"type": "string", "description": "The id get_goal returned, exactly."},
        "revision": {"type": "number", "description": "The revision get_goal returned, exactly (a positive number)."},
        "action": {
            "type": "string",
            "description": "edit, pause and resume need a direct request from a human at the top level. complete "
            "and blocked may also be used inside an automatic continuation round of this goal; blocked is refused "
            "until the configured minimum number of rounds has run.",
            "enum": ACTIONS,
        },
        "objective": {"type": "string", "description": "New objective; only with action edit."},
        "max_goal_rounds": {"type": "number", "description": "New round cap; only with action edit."},
        "blocked_reason": {
            "type": "string",
            "description": "Only with action blocked, and then required: the concrete obstacle that lasted across "
            "rounds and stops progress.",
        },
    },
    "required": ["goal_id", "revision", "action"],
}
COMPLETE_WRAPUP = (
    "The goal is marked complete and this autonomous run is ending. Write the closing message to the user now: "
    "state the outcome, summarize what was done and how it was verified, and point to the concrete results "
    "(files, commits, or other artifacts). Report only what earlier rounds and tool results in this session "
    "actually establish; when a detail is not in the session, say so instead of inventing it. Note anything the "
    "user should review or do next. Address the user directly. Do not call any more tools in this run; further "
    "work waits for the user's next instruction."
)
BLOCKED_WRAPUP = (
    "The goal is marked blocked and this autonomous run is ending. Write the closing message to the user now: "
    "state what has been completed so far, describe the concrete blocking condition and what you tried, and say "
    "exactly what you need from the user to continue. Report only what earlier rounds and tool results in this "
    "session actually establish; when a detail is not in the session, say so instead of inventing it. Address "
    "the user directly. Do not call any more tools in this run; further work waits for the user's next "
    "instruction."
)
SUMMARY_MAX_CHARS = 120
ONLY_EDIT = "objective and max_goal_rounds are valid only with action edit"
ONLY_BLOCKED = "blocked_reason is valid only with action blocked"


def guidance(blocked_after: int) -> str:
    """The goal policy section of the system prompt (our wording of DeepSeek Harness's rules)."""
    return (
        "A direct human request in any language can call for create_goal when it describes a long-running "
        "objective. When a session is resumed or forked, its active goal stops running on its own: if a human then "
        "asks, in any words, to continue, call update_goal with action resume to rearm it. Mark a goal complete "
        "only once its objective is really achieved. Mark it blocked only when one and the same obstacle has "
        f"persisted through at least {blocked_after} consecutive goal rounds, and name that obstacle in "
        "blocked_reason; hard work, doubt, or work still left to do is not a blocker."
    )


class HarnessError(ToolError):
    """A refused goal-tool call, named as DeepSeek Harness names it in ``tool/result.error``."""

    error_name = "HarnessError"


def goal_value(goal: dict[str, Any] | None) -> dict[str, Any]:
    """The compact result every goal tool returns: the snapshot and the activation."""
    if goal is None:
        return {"goal": None}
    snapshot = {key: goal[key] for key in ("id", "revision", "objective", "phase", "roundsStarted", "maxGoalRounds")}
    if "blockedReason" in goal:
        snapshot["blockedReason"] = dict(goal["blockedReason"])
    return {"goal": snapshot, "activation": goal["activation"]}


def render(value: dict[str, Any]) -> str:
    """The value as compact JSON, as the model reads it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def open_turn_messages(agent: Agent) -> list[dict[str, Any]]:
    """The ``user/message`` payloads logged since the open turn started; refused between turns."""
    events = agent.session.events
    for index in range(len(events) - 1, -1, -1):
        etype = events[index]["type"]
        if etype == "turn/end":
            break
        if etype == "turn/start":
            return [e["data"] for e in events[index + 1 :] if e["type"] == "user/message"]
    raise HarnessError("goal tools require an open model turn", "GOAL_TOOL_DRIVER_REQUIRED")


def calling_agent(exec: ToolExec) -> Agent:
    """The agent that made the call; goal tools need one."""
    if exec.agent is None:
        raise HarnessError("goal tools require a calling agent", "GOAL_TOOL_AGENT_REQUIRED")
    return exec.agent


def direct_human(agent: Agent, messages: list[dict[str, Any]]) -> bool:
    """Whether a top-level agent's open turn holds a prompt a human sent."""
    if agent.options.subagent_depth:
        return False
    return any((m.get("source") or {}).get("kind") == "user" for m in messages)


def require_direct_human(agent: Agent, messages: list[dict[str, Any]]) -> None:
    """Refuse unless a human asked in this turn."""
    if not direct_human(agent, messages):
        raise HarnessError(
            "this goal operation requires a direct human turn on a top-level agent", "GOAL_TOOL_AUTHORITY_REQUIRED"
        )


def is_current_round(goal: dict[str, Any] | None, messages: list[dict[str, Any]]) -> bool:
    """Whether the open turn is the current goal's latest admitted round."""
    if goal is None:
        return False
    for message in messages:
        source = goal_round_source(message)
        if source is not None and (source.get("goalId"), source.get("revision"), source["round"]) == (
            goal["id"],
            goal["revision"],
            goal["roundsStarted"],
        ):
            return True
    return False


def same_ref(goal: dict[str, Any], ref: dict[str, Any]) -> bool:
    """Whether ``ref`` names exactly this revision of ``goal``."""
    return bool(goal["id"] == ref["id"] and goal["revision"] == ref["revision"])


def goal_ref(goal_id: str, revision: float) -> dict[str, Any]:
    """The compare-and-set ref the model passed."""
    if not goal_id or goal_id != goal_id.strip() or not float(revision).is_integer() or revision < 1:
        raise HarnessError(
            "goal_id must be non-empty and revision must be a positive safe integer", "GOAL_TOOL_INVALID_UPDATE"
        )
    return {"id": goal_id, "revision": int(revision)}


def wrapup(action: str, goal: dict[str, Any], reason: str | None) -> dict[str, Any]:
    """The closing instruction that follows a goal round's ``complete`` or ``blocked``."""
    heading = f"Objective: {json.dumps(goal['objective'], ensure_ascii=False)}\n"
    if reason is None:
        body = f"<goal_complete>\n{heading}{COMPLETE_WRAPUP}\n</goal_complete>"
    else:
        blocked = json.dumps(reason, ensure_ascii=False)
        body = f"<goal_blocked>\n{heading}Blocked: {blocked}\n{BLOCKED_WRAPUP}\n</goal_blocked>"
    summary = f"{action}: {goal['objective']}"
    if len(summary) > SUMMARY_MAX_CHARS:
        summary = summary[: SUMMARY_MAX_CHARS - 1] + "…"
    return user_message([{"type": "text", "text": body}], {"kind": "tool-goal", "form": "notice", "summary": summary})


class GoalTools:
    """The three tools over the goal service."""

    def __init__(self, goals: GoalService, blocked_after: int) -> None:
        self.goals = goals
        self.blocked_after = blocked_after

    def get_goal(self, args: dict[str, Any], exec: ToolExec) -> str:
        """Read the goal."""
        agent = calling_agent(exec)
        open_turn_messages(agent)
        return render(goal_value(self.goals.get(agent)))

    def create_goal(self, args: dict[str, Any], exec: ToolExec) -> str:
        """Create a goal, on a human's request."""
        agent = calling_agent(exec)
        require_direct_human(agent, open_turn_messages(agent))
        return render(goal_value(self.goals.create(agent, args["objective"], args.get("max_goal_rounds"))))

    def update_goal(self, args: dict[str, Any], exec: ToolExec) -> str | ToolOutcome:
        """Edit, pause, resume, complete or block the goal, each under its own authority."""
        agent = calling_agent(exec)
        messages = open_turn_messages(agent)
        ref = goal_ref(args["goal_id"], args["revision"])
        action = args["action"]
        objective = args.get("objective") or None
        rounds = args.get("max_goal_rounds") or None
        reason = args.get("blocked_reason") or None
        if action == "edit":
            require_direct_human(agent, messages)
            if reason is not None:
                raise HarnessError(ONLY_BLOCKED, "GOAL_TOOL_INVALID_UPDATE")
            return render(goal_value(self.goals.edit(agent, ref, objective, rounds)))
        if action in ("pause", "resume"):
            return self._pause_or_resume(agent, messages, ref, action, objective or rounds or reason)
        return self._settle(agent, messages, ref, args)

    def _pause_or_resume(
        self, agent: Agent, messages: list[dict[str, Any]], ref: dict[str, Any], action: str, extra: object
    ) -> str:
        require_direct_human(agent, messages)
        if extra is not None:
            raise HarnessError(f"{ONLY_EDIT}; {ONLY_BLOCKED}", "GOAL_TOOL_INVALID_UPDATE")
        current = self.goals.get(agent)
        if action == "resume" and current is not None and current["phase"] == "paused" and same_ref(current, ref):
            raise HarnessError(
                "the model cannot resume a paused goal; the user must resume it", "GOAL_TOOL_RESUME_PAUSED"
            )
        goal = self.goals.pause(agent, ref) if action == "pause" else self.goals.resume(agent, ref)
        return render(goal_value(goal))

    def _settle(
        self,
        agent: Agent,
        messages: list[dict[str, Any]],
        ref: dict[str, Any],
        args: dict[str, Any],
    ) -> str | ToolOutcome:
        action = args["action"]
        reason = args.get("blocked_reason") or None
        extra = args.get("objective") or args.get("max_goal_rounds") or None
        from_round = not direct_human(agent, messages)
        current = self.goals.get(agent)
        if from_round and not is_current_round(current, messages):
            raise HarnessError(
                "complete and blocked require a direct human turn or the current goal round",
                "GOAL_TOOL_AUTHORITY_REQUIRED",
            )
        if extra is not None:
            raise HarnessError(ONLY_EDIT, "GOAL_TOOL_INVALID_UPDATE")
        if action == "complete" and reason is not None:
            raise HarnessError(ONLY_BLOCKED, "GOAL_TOOL_INVALID_UPDATE")
        if action == "blocked" and (reason is None or not reason.strip()):
            raise HarnessError("blocked_reason is required with action blocked", "GOAL_TOOL_INVALID_UPDATE")
        if action == "blocked" and from_round and current is not None and current["roundsStarted"] < self.blocked_after:
            raise HarnessError(
                f"blocked requires at least {self.blocked_after} consecutive goal rounds; "
                f"current round is {current['roundsStarted']}",
                "GOAL_TOOL_BLOCK_THRESHOLD",
            )
        if action == "complete":
            goal = self.goals.complete(agent, ref)
        else:
            goal = self.goals.block(agent, ref, {"code": "model-reported", "message": reason})
        result = render(goal_value(goal))
        if not from_round:
            return result
        notice = wrapup(action, goal, reason if action == "blocked" else None)
        return ToolOutcome(text(result), False, None, None, [notice])


class Config(BaseModel):
    """``blockedAfterConsecutiveRounds``: rounds a goal must run before its own round may report it blocked."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    blockedAfterConsecutiveRounds: int = Field(3, ge=1)


name = "tool-goal"
inject = (TOOLS, GOALS, SYSTEM_PROMPT)


def apply(ctx: Context, config: Config) -> None:
    """Register the tools and the policy section."""
    blocked_after = config.blockedAfterConsecutiveRounds
    tools = GoalTools(ctx.require(GOALS), blocked_after)
    ctx.require(SYSTEM_PROMPT).section(ctx, "tool:goal", SECTION_ORDER["TOOL_GOAL"], guidance(blocked_after))
    registry = ctx.require(TOOLS)
    registry.register(ctx, ToolDefinition("get_goal", GET_DESCRIPTION, GET_PARAMETERS, tools.get_goal))
    registry.register(ctx, ToolDefinition("create_goal", CREATE_DESCRIPTION, CREATE_PARAMETERS, tools.create_goal))
    registry.register(ctx, ToolDefinition("update_goal", UPDATE_DESCRIPTION, UPDATE_PARAMETERS, tools.update_goal))
