"""Plugin ``tool-schedule``: ``schedule_create``, ``schedule_list``, ``schedule_update`` and ``schedule_delete``.

Names, argument schemas and result texts are DeepSeek Harness's (``dsh-tool-schedule``); descriptions are
our own words. Every result, a refusal included, is the JSON of a value (the reference renders them so),
never a tool error. The tools exist only while a ``schedule`` service does, so a profile without it (the
``sdk`` profile, like the reference's) does not offer them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydsh.contract.tools import TOOLS, ToolDefinition, ToolExec, ToolOutcome
from pydsh.kernel.context import Context
from pydsh.schedules import records
from pydsh.schedules.keys import SCHEDULES
from pydsh.schedules.records import MAX_TITLE, MIN_EVERY_SECONDS, PROMPT_REQUIRED, TITLE_REQUIRED, TITLE_TOO_LONG
from pydsh.schedules.service import Schedules, input_error, refusal
from pydsh.schedules.timing import ScheduleInputError

ZONE = {"type": "string", "description": "UTC or an IANA Area/Location zone, e.g. Asia/Shanghai."}
SELECTOR_PARAMETERS: dict[str, Any] = {
    "every_seconds": {
        "type": "number",
        "description": f"Repeat every this many whole seconds (at least {MIN_EVERY_SECONDS}), counted from when the "
        "reminder is saved; changing it with schedule_update counts again from the change.",
    },
    "daily": {
        "type": "object",
        "additionalProperties": False,
        "description": "Once a day at a local time.",
        "properties": {
            "time": {
                "type": "string",
                "description": "HH:mm:ss, optionally with 1-3 fractional digits, e.g. 23:00:00.",
            },
            "time_zone": ZONE,
        },
        "required": ["time", "time_zone"],
    },
    "weekly": {
        "type": "object",
        "additionalProperties": False,
        "description": "On chosen weekdays at a local time.",
        "properties": {
            "time": {
                "type": "string",
                "description": "HH:mm:ss, optionally with 1-3 fractional digits, e.g. 09:00:00.",
            },
            "time_zone": ZONE,
            "weekdays": {
                "type": "array",
                "description": "ISO weekday numbers, 1 for Monday through 7 for Sunday, each at most once.",
                "items": {"type": "integer"},
            },
        },
        "required": ["time", "time_zone", "weekdays"],
    },
    "cron": {
        "type": "object",
        "additionalProperties": False,
        "description": "A five-field Vixie cron expression evaluated in a time zone.",
        "properties": {
            "expression": {
                "type": "string",
                "description": 'Fields: minute hour day-of-month month day-of-week, e.g. "*/15 9-17 * * 1-5". If both '
                "day fields are restricted, a date that matches either one counts.",
            },
            "time_zone": ZONE,
        },
        "required": ["expression", "time_zone"],
    },
    "at": {
        "description": "One absolute moment: an RFC 3339 date-time with an offset, or a local date and time in an "
        "IANA time_zone.",
        "oneOf": [
            {"type": "string"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"date": {"type": "string"}, "time": {"type": "string"}, "time_zone": {"type": "string"}},
                "required": ["date", "time", "time_zone"],
            },
        ],
    },
}
TITLE_DESCRIPTION = (
    f"A short name for the task in the user's language, at most {MAX_TITLE} characters: the core action and its "
    "subject only, keeping identifiers that matter (PR numbers, branch names). Leave out how often or when it runs, "
    "dates and times, time zones, status, and configuration or execution details, even if the request or an "
    "existing title includes them, and add no parenthetical notes. Timing goes in the timing parameters and "
    "instructions in prompt."
)
CREATE = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "description": "What the reminder should say when it comes due."},
        "title": {"type": "string", "description": TITLE_DESCRIPTION},
        "after_seconds": {"type": "number", "description": "Delay in whole seconds."},
        **SELECTOR_PARAMETERS,
    },
    "required": ["prompt", "title"],
}
LIST: dict[str, Any] = {"type": "object", "properties": {}}
DELETE = {
    "type": "object",
    "properties": {"id": {"type": "string", "description": "The reminder's exact id."}},
    "required": ["id"],
}
UPDATE = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "The reminder's id, as schedule_list shows it."},
        "title": {"type": "string", "description": "A new task name, following the schedule_create title rules."},
        "prompt": {"type": "string", "description": "New reminder text."},
        **SELECTOR_PARAMETERS,
    },
    "required": ["id"],
}
DESCRIPTIONS = {
    "schedule_create": (
        "Set a reminder in this session: its prompt is delivered to you when it comes due. Give exactly one timing "
        "parameter: after_seconds, at, every_seconds, daily, weekly, or cron. A local time that a time zone skips is "
        "skipped; a local time that occurs twice fires once, at the first. After downtime a repeating reminder "
        "delivers only its most recent missed occurrence, and a crash may deliver one twice."
    ),
    "schedule_list": "Show this session's active reminders.",
    "schedule_delete": (
        "Remove a reminder of this session, whether active or finished. A reminder message already waiting in the "
        "queue stays there."
    ),
    "schedule_update": (
        "Edit a reminder in place; its id stays the same. Give a new title, a new prompt, or at most one timing "
        "parameter; anything left out keeps its current value. A relative delay cannot be changed: create a new "
        "reminder instead."
    ),
}
CREATE_KEYS = frozenset({"prompt", "title", *records.SELECTORS})
UPDATE_KEYS = frozenset({"id", "title", "prompt", *records.SELECTORS[1:]})
INTERNAL = {"code": "internal_error", "message": "The schedule operation failed."}


def _interval(args: dict[str, Any]) -> dict[str, Any] | None:
    seconds = args.get("every_seconds")
    if seconds is None:
        return None
    if records.whole(seconds) is None:
        return {"code": "invalid_rule", "message": "every_seconds must be a safe integer."}
    if seconds < MIN_EVERY_SECONDS:
        return {"code": "frequency_too_high", "message": f"every_seconds must be at least {MIN_EVERY_SECONDS}."}
    return None


def _text_problem(args: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A supplied title or prompt that is blank or too long."""
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        return {"code": "invalid_prompt", "message": TITLE_REQUIRED if key == "title" else PROMPT_REQUIRED}
    if key == "title" and len(value.strip()) > MAX_TITLE:
        return {"code": "invalid_prompt", "message": TITLE_TOO_LONG}
    return None


def create_problem(args: dict[str, Any]) -> dict[str, Any] | None:
    """What is wrong with ``schedule_create``'s arguments before any rule is read (the reference's checks)."""
    chosen = [s for s in records.SELECTORS if args.get(s) is not None]
    if set(args) - CREATE_KEYS or len(chosen) != 1:
        message = "schedule_create accepts exactly one of after_seconds, at, every_seconds, daily, weekly, or cron."
        return {"code": "invalid_selector", "message": message}
    if not isinstance(args.get("prompt"), str) or not args["prompt"].strip():
        return {"code": "invalid_prompt", "message": PROMPT_REQUIRED}
    if not isinstance(args.get("title"), str) or not args["title"].strip():
        return {"code": "invalid_prompt", "message": TITLE_REQUIRED}
    problem = _text_problem(args, "title")
    if problem is None and args.get("after_seconds") is not None:
        delay = records.whole(args["after_seconds"])
        if delay is None or delay <= 0:
            problem = {"code": "invalid_rule", "message": "after_seconds must be a positive safe integer."}
    return problem or _interval(args)


def update_problem(args: dict[str, Any]) -> dict[str, Any] | None:
    """What is wrong with ``schedule_update``'s arguments before the reminder is looked up."""
    chosen = [s for s in records.SELECTORS[1:] if args.get(s) is not None]
    if set(args) - UPDATE_KEYS or len(chosen) > 1:
        message = "schedule_update accepts at most one of at, every_seconds, daily, weekly, or cron."
        return {"code": "invalid_selector", "message": message}
    record_id = args.get("id")
    if not isinstance(record_id, str) or not record_id or record_id.strip() != record_id:
        return {
            "code": "invalid_rule",
            "message": "schedule_update id must be non-empty without surrounding whitespace.",
        }
    if not chosen and args.get("title") is None and args.get("prompt") is None:
        message = "schedule_update needs a new title, prompt, or one of at, every_seconds, daily, weekly, or cron."
        return {"code": "invalid_selector", "message": message}
    return _text_problem(args, "title") or _text_problem(args, "prompt") or _interval(args)


class ScheduleTools:
    """The four tools over the ``schedule`` service, acting on the calling agent's own session."""

    def __init__(self, service: Schedules) -> None:
        self.service = service

    def create(self, agent: Any, args: dict[str, Any]) -> Any:
        problem = create_problem(args)
        if problem is not None:
            return problem
        return records.view(self.service.create(agent, args), self.service.clock())

    def list(self, agent: Any, args: dict[str, Any]) -> Any:
        return self.service.views(agent.session)

    def delete(self, agent: Any, args: dict[str, Any]) -> Any:
        record_id = args.get("id")
        if not isinstance(record_id, str) or not record_id or record_id.strip() != record_id:
            message = "schedule_delete id must be non-empty without surrounding whitespace."
            return {"code": "invalid_rule", "message": message}
        return self.service.delete(agent, record_id)

    def update(self, agent: Any, args: dict[str, Any]) -> Any:
        problem = update_problem(args)
        if problem is not None:
            return problem
        result = self.service.update(agent, args["id"], args)
        return result if "code" in result else records.view(result, self.service.clock())


def run(body: Callable[[Any, dict[str, Any]], Any]) -> Callable[[Any, ToolExec], ToolOutcome]:
    """A tool body that refuses subagents and renders whatever value it returns as compact JSON."""

    def execute(args: Any, exec: ToolExec) -> ToolOutcome:
        agent = exec.agent
        value: Any = dict(INTERNAL) if agent is None else refusal(agent)
        if value is None:
            try:
                value = body(agent, args if isinstance(args, dict) else {})
            except ScheduleInputError as exc:
                value = input_error(exc)
        return ToolOutcome([{"type": "text", "text": records.compact(value)}], False, None, value)

    return execute


def definitions(service: Schedules) -> list[ToolDefinition]:
    """The four tool definitions, in the reference's registration order."""
    tools = ScheduleTools(service)
    bodies = {
        "schedule_create": (CREATE, tools.create),
        "schedule_list": (LIST, tools.list),
        "schedule_delete": (DELETE, tools.delete),
        "schedule_update": (UPDATE, tools.update),
    }
    return [ToolDefinition(n, DESCRIPTIONS[n], schema, run(body)) for n, (schema, body) in bodies.items()]


name = "tool-schedule"
inject = (TOOLS,)
optional = (SCHEDULES,)


def apply(ctx: Context, config: None) -> None:
    """Register the reminder tools in the mounting scope (a preset's, so the preset decides who has them)
    when a ``schedule`` service exists; without one the row is active and offers nothing."""
    service = ctx.get(SCHEDULES)
    if service is None:
        return
    registry = ctx.require(TOOLS)
    for definition in definitions(service):
        registry.register(ctx, definition)
