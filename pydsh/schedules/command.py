"""Plugin ``command-schedule``: ``/schedule`` lists the session's reminders, ``/schedule delete ID`` removes one.

Like ``/compact`` the prompt is claimed at its turn's first step and never reaches the model: ``command/run``
and ``command/done`` record it (the list or the outcome is ``command/done``'s text), and a removal is the
same ``schedule/change`` record the ``schedule_delete`` tool writes. DeepSeek Harness has no such command
(its web page edits reminders over RPC); this is pydsh's way to see and cancel them from any frontend.
"""

from __future__ import annotations

from typing import Any

from pydsh.agent.hooks import PRE_STEP, PreStep, PreStepDecision
from pydsh.contract.agent import text_of
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.schedules.keys import SCHEDULES
from pydsh.schedules.records import Record
from pydsh.schedules.service import Schedules, is_delegated

COMMAND = "/schedule"
USAGE = "usage: /schedule, or /schedule delete ID"


def command_args(messages: list[dict[str, Any]]) -> list[str] | None:
    """The words after ``/schedule`` when the claimed input is one user prompt that is this command."""
    if len(messages) != 1 or (messages[0].get("source") or {}).get("kind") != "user":
        return None
    words = text_of(messages[0]).split()
    return words[1:] if words and words[0] == COMMAND else None


RULES: dict[str, Any] = {
    "after": lambda r: f"once, {r['afterSeconds']}s after it was set",
    "at": lambda r: "once",
    "every": lambda r: f"every {r['everySeconds']}s",
    "daily": lambda r: f"daily at {r['time']} {r['timeZone']}",
    "weekly": lambda r: f"weekly on {','.join(map(str, r['weekdays']))} at {r['time']} {r['timeZone']}",
    "cron": lambda r: f"cron {r['expression']} {r['timeZone']}",
}


def describe(record: Record) -> str:
    """One line of the list: id, title, rule and next target."""
    rule: str = RULES[record["kind"]](record)
    return f"{record['id']}  {record['title']}  ({rule}; next {record['scheduledAt']})"


def run_command(service: Schedules, agent: Any, args: list[str]) -> dict[str, Any]:
    """``command/done``'s kind and text for one ``/schedule`` invocation."""
    if is_delegated(agent):
        return {"kind": "error", "text": "A delegated subagent cannot use reminders."}
    if not args:
        lines = [describe(r) for r in service.listed(agent)]
        return {"kind": "success", "text": "\n".join(lines) if lines else "no reminders"}
    if len(args) == 2 and args[0] == "delete":
        result = service.delete(agent, args[1])
        if result["deleted"]:
            return {"kind": "success", "text": f"deleted {args[1]}"}
        return {"kind": "error", "text": f"no reminder {args[1]}"}
    return {"kind": "error", "text": USAGE}


name = "command-schedule"
inject = (SCHEDULES,)


def apply(ctx: Context, config: None) -> None:
    """Intercept ``/schedule`` prompts at the first step of their turn."""
    service = ctx.require(SCHEDULES)

    async def on_pre_step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        messages = payload["messages"]
        args = command_args(messages) if payload["step"] == 1 else None
        if args is None:
            return await nxt()
        agent = payload["agent"]
        command_id = messages[0]["id"]
        run = {"commandId": command_id, "name": "schedule", "source": {"kind": "user"}}
        if args:
            run["args"] = " ".join(args)
        agent.session.append("command/run", run)
        agent.session.append("command/done", {"commandId": command_id, **run_command(service, agent, args)})
        return {"kind": "enter", "messages": []}

    ctx.on(PRE_STEP, on_pre_step, name="command-schedule")
