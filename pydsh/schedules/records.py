"""Reminder records: building one from a timing selector, their ``schedule/change`` log records and fold,
the view the tools return, and the framing of a delivered reminder (texts as DeepSeek Harness writes them).

A record is the reference's shape, keys in its order: ``id kind title prompt <rule fields> scheduledAt``,
where ``scheduledAt`` is the earliest occurrence not yet delivered. The log carries version-1
``schedule/change`` records: ``create`` (the record), ``dispatch`` (an occurrence was delivered; recurring
rules carry ``acceptedAt``, the decision time the next target is derived from), ``delete``, and pydsh's
``update`` (the replaced record, same id).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import time
from typing import Any

from pydsh.schedules.cron import latest_cron, next_cron, parse_cron
from pydsh.schedules.timing import (
    Occurrence,
    ScheduleInputError,
    calendar_occurrence,
    canonical_zone,
    clock_time,
    every_day,
    every_occurrence,
    future_instant,
    iso,
    next_matching,
    on_weekdays,
    parse_at,
    parse_iso,
    weekdays_of,
)

CHANGE = "schedule/change"
VERSION = 1
MIN_EVERY_SECONDS = 60
MAX_TITLE = 120
TITLE_REQUIRED = "title is required and must be non-empty after trimming."
TITLE_TOO_LONG = f"title must be at most {MAX_TITLE} characters."
PROMPT_REQUIRED = "prompt must be non-empty after trimming."
RECURRING = frozenset({"every", "daily", "weekly", "cron"})
SELECTORS = ("after_seconds", "at", "every_seconds", "daily", "weekly", "cron")
FRAMING = "This is a scheduled message from the user"

Record = dict[str, Any]


def new_id() -> str:
    """A fresh reminder id, as the reference makes them."""
    return f"schedule-{uuid.uuid4()}"


def whole(value: object) -> int | None:
    """``value`` as an int when it is a whole JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        return None
    return int(value)


def title_of(value: object) -> str:
    """A trimmed title of 1..120 characters."""
    if not isinstance(value, str) or not value.strip():
        raise ScheduleInputError("invalid_prompt", TITLE_REQUIRED)
    if len(value.strip()) > MAX_TITLE:
        raise ScheduleInputError("invalid_prompt", TITLE_TOO_LONG)
    return value.strip()


def prompt_of(value: object) -> str:
    """A trimmed, non-empty reminder prompt."""
    if not isinstance(value, str) or not value.strip():
        raise ScheduleInputError("invalid_prompt", PROMPT_REQUIRED)
    return value.strip()


def head(record_id: str, title: str, prompt: str) -> Record:
    """The leading fields every record has (``kind`` is filled in by the selector's builder)."""
    return {"id": record_id, "kind": "", "title": title, "prompt": prompt}


def after_record(head: Record, seconds: object, now: int) -> Record:
    """A one-shot ``seconds`` after ``now``."""
    delay = whole(seconds)
    if delay is None or delay <= 0:
        raise ScheduleInputError("invalid_rule", "after_seconds must be a positive safe integer.")
    return {**head, "kind": "after", "afterSeconds": delay, "scheduledAt": future_instant(now + delay * 1000, now)}


def at_record(head: Record, at: object, now: int) -> Record:
    """A one-shot at an absolute instant."""
    return {**head, "kind": "at", "scheduledAt": future_instant(parse_at(at), now)}


def every_record(head: Record, seconds: object, now: int) -> Record:
    """A fixed-rate reminder aligned to ``now``."""
    interval = whole(seconds)
    if interval is None:
        raise ScheduleInputError("invalid_rule", "every_seconds must be a safe integer.")
    if interval < MIN_EVERY_SECONDS:
        raise ScheduleInputError("frequency_too_high", f"every_seconds must be at least {MIN_EVERY_SECONDS}.")
    return {
        **head,
        "kind": "every",
        "everySeconds": interval,
        "scheduledAt": future_instant(now + interval * 1000, now),
    }


def _zone_arg(value: dict[str, Any]) -> str:
    if not isinstance(value["time_zone"], str):
        raise ScheduleInputError("invalid_time_zone", "time_zone must be a string.")
    return canonical_zone(value["time_zone"])


def _no_future(selector: str) -> ScheduleInputError:
    return ScheduleInputError(
        "time_out_of_range", f"No future {selector} occurrence is representable as a four-digit-year UTC instant."
    )


def daily_rule(daily: object) -> tuple[str, str]:
    """A daily selector's normalised time and zone."""
    if not isinstance(daily, dict) or set(daily) != {"time", "time_zone"} or not isinstance(daily["time"], str):
        raise ScheduleInputError(
            "invalid_rule",
            "daily must contain exactly time and time_zone, with time HH:mm:ss and optional 1-3 fractional digits.",
        )
    zone = _zone_arg(daily)
    return clock_time(daily["time"], "daily"), zone


def daily_record(head: Record, daily: object, now: int) -> Record:
    """Every day at a local time."""
    clock, zone = daily_rule(daily)
    target = next_matching(time.fromisoformat(clock), zone, now, every_day, None)
    if target is None:
        raise _no_future("daily")
    return {**head, "kind": "daily", "time": clock, "timeZone": zone, "scheduledAt": iso(target)}


def weekly_rule(weekly: object) -> tuple[str, str, list[int]]:
    """A weekly selector's normalised time, zone and weekdays."""
    keys = {"time", "time_zone", "weekdays"}
    if not isinstance(weekly, dict) or set(weekly) != keys or not isinstance(weekly["time"], str):
        raise ScheduleInputError(
            "invalid_rule",
            "weekly must contain exactly time, time_zone, and weekdays, with time HH:mm:ss and optional 1-3 "
            "fractional digits.",
        )
    zone = _zone_arg(weekly)
    return clock_time(weekly["time"], "weekly"), zone, weekdays_of(weekly["weekdays"])


def weekly_record(head: Record, weekly: object, now: int) -> Record:
    """On some weekdays at a local time."""
    clock, zone, days = weekly_rule(weekly)
    target = next_matching(time.fromisoformat(clock), zone, now, on_weekdays(days), None)
    if target is None:
        raise _no_future("weekly")
    fields = {"time": clock, "timeZone": zone, "weekdays": days, "scheduledAt": iso(target)}
    return {**head, "kind": "weekly", **fields}


def cron_rule(cron: object) -> tuple[str, str]:
    """A cron selector's expression (fields single-spaced) and zone."""
    if (
        not isinstance(cron, dict)
        or set(cron) != {"expression", "time_zone"}
        or not isinstance(cron["expression"], str)
    ):
        raise ScheduleInputError(
            "invalid_rule", "cron must contain exactly expression and time_zone, with a five-field cron expression."
        )
    zone = _zone_arg(cron)
    return parse_cron(cron["expression"]).expression, zone


def cron_record(head: Record, cron: object, now: int) -> Record:
    """At the times a cron expression names, in a zone."""
    expression, zone = cron_rule(cron)
    target = next_cron(parse_cron(expression), zone, now)
    if target is None:
        raise _no_future("cron")
    return {**head, "kind": "cron", "expression": expression, "timeZone": zone, "scheduledAt": iso(target)}


BUILDERS = {
    "after_seconds": after_record,
    "at": at_record,
    "every_seconds": every_record,
    "daily": daily_record,
    "weekly": weekly_record,
    "cron": cron_record,
}


def build(head: Record, selector: str, value: object, now: int) -> Record:
    """The record of one selector (the key of :data:`BUILDERS`) created at ``now`` from ``head`` (:func:`head`)."""
    return BUILDERS[selector](head, value, now)


def same_timing(current: Record, selector: str, value: object) -> bool:
    """Whether an update's selector states the rule ``current`` already has (its target is then kept)."""
    kind: str = current["kind"]
    if selector == "at":
        return kind in ("after", "at") and parse_at(value) == parse_iso(current["scheduledAt"])
    if selector == "every_seconds":
        return kind == "every" and whole(value) == current["everySeconds"]
    if selector == "daily":
        return kind == "daily" and daily_rule(value) == (current["time"], current["timeZone"])
    if selector == "weekly":
        return kind == "weekly" and weekly_rule(value) == (current["time"], current["timeZone"], current["weekdays"])
    return bool(kind == "cron" and cron_rule(value) == (current["expression"], current["timeZone"]))


def occurrence(record: Record, decision: int) -> Occurrence:
    """The occurrence of a due recurring record delivered at ``decision`` and its next target."""
    kind, scheduled = record["kind"], record["scheduledAt"]
    if kind == "every":
        return every_occurrence(scheduled, record["everySeconds"], decision)
    if kind == "daily":
        return calendar_occurrence(
            scheduled, time.fromisoformat(record["time"]), record["timeZone"], decision, every_day
        )
    if kind == "weekly":
        days = on_weekdays(record["weekdays"])
        return calendar_occurrence(scheduled, time.fromisoformat(record["time"]), record["timeZone"], decision, days)
    rule, zone = parse_cron(record["expression"]), record["timeZone"]
    at = latest_cron(rule, zone, decision, parse_iso(scheduled))
    following = next_cron(rule, zone, decision)
    return Occurrence(iso(at), None if following is None else iso(following))


def view(record: Record, now: int) -> dict[str, Any]:
    """What a tool returns of a record: the record, ``state`` and ``deliveryMode``."""
    state = "overdue" if now >= parse_iso(record["scheduledAt"]) else "scheduled"
    return {**record, "state": state, "deliveryMode": "host"}


def one_shot_text(record: Record) -> str:
    """The text of a delivered one-shot reminder."""
    return "\n".join(
        [
            "[SCHEDULE REMINDER]",
            FRAMING,
            f"schedule_id_json: {compact(record['id'])}",
            f"occurrence_at: {record['scheduledAt']}",
            f"reminder_prompt_json: {compact(record['prompt'])}",
        ]
    )


def batch_text(due: list[tuple[Record, str]]) -> str:
    """The text of the recurring reminders delivered together (each with its occurrence)."""
    payload = [{"schedule_id": r["id"], "occurrence_at": at, "reminder_prompt": r["prompt"]} for r, at in due]
    return "\n".join(["[SCHEDULE REMINDER BATCH]", FRAMING, f"reminders_json: {compact(payload)}"])


def compact(value: Any) -> str:
    """JSON as the reference's ``JSON.stringify`` writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Book:
    """The reminders of one session folded from its log: the active ones and the ids that ended."""

    active: dict[str, Record] = field(default_factory=dict)
    ended: frozenset[str] = frozenset()

    def listed(self) -> list[Record]:
        """Active records by target, then id (the reference's order)."""
        return sorted(self.active.values(), key=lambda r: (r["scheduledAt"], r["id"]))


class ScheduleFold:
    """The session projection of ``schedule/change`` records (unknown or stale changes are skipped)."""

    key = "schedules"

    def init(self) -> Book:
        return Book()

    def fold(self, state: Book, event: Any) -> Book:
        if event["type"] != CHANGE:
            return state
        return apply_change(state, event["data"])


def apply_change(book: Book, change: dict[str, Any]) -> Book:
    """``book`` after one logged change."""
    operation, active = change.get("operation"), dict(book.active)
    if operation in ("create", "update") and isinstance(change.get("schedule"), dict):
        record = dict(change["schedule"])
        active[record["id"]] = record
        return Book(active, book.ended - {record["id"]})
    record_id = str(change.get("id"))
    if operation == "delete":
        active.pop(record_id, None)
        return Book(active, book.ended - {record_id})
    if operation != "dispatch" or record_id not in active:
        return book
    return _dispatched(book, active, active[record_id], change.get("acceptedAt"))


def _dispatched(book: Book, active: dict[str, Record], record: Record, accepted_at: object) -> Book:
    """A delivered occurrence: a one-shot ends; a recurring record moves to its next target or ends."""
    following = None
    if record["kind"] in RECURRING and isinstance(accepted_at, str):
        following = occurrence(record, parse_iso(accepted_at)).next
    if following is None:
        del active[record["id"]]
        return Book(active, book.ended | {record["id"]})
    active[record["id"]] = {**record, "scheduledAt": following}
    return Book(active, book.ended)


def create_change(record: Record) -> dict[str, Any]:
    """The log record of a new reminder."""
    return {"version": VERSION, "operation": "create", "schedule": record}


def update_change(record: Record) -> dict[str, Any]:
    """The log record of a reminder changed in place."""
    return {"version": VERSION, "operation": "update", "schedule": record}


def delete_change(record_id: str) -> dict[str, Any]:
    """The log record of a removed reminder."""
    return {"version": VERSION, "operation": "delete", "id": record_id}


def dispatch_change(record: Record, accepted_at: int) -> dict[str, Any]:
    """The log record of a delivered occurrence (recurring ones carry the decision time)."""
    change: dict[str, Any] = {"version": VERSION, "operation": "dispatch", "id": record["id"]}
    if record["kind"] in RECURRING:
        change["acceptedAt"] = iso(accepted_at)
    return change
