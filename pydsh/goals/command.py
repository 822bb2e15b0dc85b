"""``/goal``: the human's control of the session goal, with DeepSeek Harness's grammar and answers.

``/goal`` shows the goal; ``/goal <objective>`` creates one; ``/goal edit <objective>``, ``pause``,
``resume`` and ``clear`` change it. Frontends (the terminal's command list) call :func:`run_goal_command`;
the answer is shown to the human only — the model sees the goal through its tools and round prompts.
The reference's ``sdk`` profile passes a ``/goal`` prompt to the model unchanged, and so does pydsh's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydsh.goals.service import GoalError, GoalService

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent

USAGE = "Usage: /goal [<objective>|clear|edit <objective>|pause|resume]"
INVALID = "The goal command is not valid for the current state. Run /goal to view available commands."


def parse(raw: str) -> tuple[str, str]:
    """``(kind, objective)``: ``show``, ``clear``, ``pause``, ``resume``, ``invalid-edit``, ``edit`` or ``create``."""
    text = raw.strip()
    control = text.lower()
    if not text:
        return "show", ""
    if control in ("clear", "pause", "resume"):
        return control, ""
    if control == "edit":
        return "invalid-edit", ""
    if control.startswith("edit") and text[4].isspace():
        return "edit", text[4:].strip()
    return "create", text


def hint(goal: dict[str, Any]) -> str:
    """The commands that make sense from the goal's state."""
    if goal["phase"] == "active" and goal["activation"] == "armed":
        return "/goal edit <objective>, /goal pause, /goal clear"
    if goal["phase"] == "complete":
        return "/goal <objective>, /goal clear"
    return "/goal edit <objective>, /goal resume, /goal clear"


def render(title: str, goal: dict[str, Any]) -> dict[str, str]:
    """The goal as the human reads it."""
    reason = goal.get("blockedReason")
    lines = [title, f"Status: {goal['phase']}"]
    if goal["phase"] == "blocked" and reason is not None:
        lines.append(f"Blocker: {reason['code']}: {reason['message']}")
    lines += [
        f"Objective: {goal['objective']}",
        f"Rounds: {goal['roundsStarted']}/{goal['maxGoalRounds']}",
        f"Activation: {goal['activation']}",
        f"Commands: {hint(goal)}",
    ]
    return {"kind": "success", "text": "\n".join(lines)}


def missing(action: str) -> dict[str, str]:
    return {"kind": "error", "text": f"No goal is currently set; /goal {action} requires one. {USAGE}"}


def run_goal_command(goals: GoalService, agent: Agent, raw: str) -> dict[str, str]:
    """Run one ``/goal`` command: ``{kind: success|error, text}``."""
    kind, objective = parse(raw)
    try:
        return _execute(goals, agent, kind, objective)
    except GoalError:
        return {"kind": "error", "text": INVALID}


def _execute(goals: GoalService, agent: Agent, kind: str, objective: str) -> dict[str, str]:
    current = goals.get(agent)
    if kind == "show":
        return (
            render("Goal", current) if current else {"kind": "success", "text": f"No goal is currently set.\n{USAGE}"}
        )
    if kind == "invalid-edit":
        return {"kind": "error", "text": f"Goal editing requires a replacement objective.\n{USAGE}"}
    if kind == "create" or (kind == "edit" and current is not None and current["phase"] == "complete"):
        if current is not None and current["phase"] != "complete":
            text = (
                f"A goal is already {current['phase']}. "
                "Use /goal edit <objective> to change it or /goal clear before replacing it."
            )
            return {"kind": "error", "text": text}
        return render("Goal created", goals.create(agent, objective))
    if current is None:
        return {"kind": "success", "text": "No goal to clear."} if kind == "clear" else missing(kind)
    ref = {"id": current["id"], "revision": current["revision"]}
    if kind == "edit":
        return render("Goal updated", goals.edit(agent, ref, objective))
    if kind == "pause":
        return render("Goal paused", goals.pause(agent, ref))
    if kind == "resume":
        return render("Goal resumed", goals.resume(agent, ref))
    goals.clear(agent, ref)
    return {"kind": "success", "text": "Goal cleared."}
