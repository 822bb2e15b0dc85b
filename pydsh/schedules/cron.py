"""Five-field (Vixie) cron rules of reminders: parsing with the reference's texts, and their occurrences.

When both day fields are restricted a date matches if either does; when either starts with ``*`` both
must match (Vixie's ``DOM_STAR``/``DOW_STAR``). Day-of-week 7 is Sunday, like 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from pydsh.schedules.timing import CRON_HORIZON_YEARS, ScheduleInputError, first_instant, wall_instant

FIELDS = (("minute", 0, 59, 59), ("hour", 0, 23, 23), ("day-of-month", 1, 31, 31), ("month", 1, 12, 12))
DAY_OF_WEEK = ("day-of-week", 0, 7, 6)
STAR_STEP = re.compile(r"^\*/(?P<step>\d+)$")
ELEMENT = re.compile(r"^(?P<start>\d+)(?:-(?P<end>\d+))?(?:/(?P<step>\d+))?$")


@dataclass(frozen=True)
class Cron:
    """A parsed rule: the matched values of each field and whether each day field started with ``*``."""

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_star: bool
    weekday_star: bool

    def matches(self, day: date) -> bool:
        """Whether a local date is one of the rule's dates."""
        if day.month not in self.months:
            return False
        in_days, in_weekdays = day.day in self.days, day.isoweekday() % 7 in self.weekdays
        if not self.day_star and not self.weekday_star:
            return in_days or in_weekdays
        return in_days and in_weekdays

    def times(self) -> list[time]:
        """The rule's local times of day, ascending."""
        return [time(hour, minute) for hour in self.hours for minute in self.minutes]


def _invalid(name: str, element: str) -> ScheduleInputError:
    return ScheduleInputError(
        "invalid_rule",
        f"cron.expression {name} field element {json.dumps(element)} must be *, a value, a-b, */n, a-b/n, or a "
        "comma-separated list of those.",
    )


def _value(text: str, name: str, low: int, high: int) -> int:
    value = int(text)
    if not low <= value <= high:
        raise ScheduleInputError("invalid_rule", f"cron.expression {name} field value {text} is outside {low}-{high}.")
    return value


def _step(text: str, name: str) -> int:
    step = int(text)
    if step < 1:
        raise ScheduleInputError("invalid_rule", f"cron.expression {name} field step must be a positive integer.")
    return step


def _element(element: str, name: str, low: int, high: int) -> range | list[int]:
    """The values one list element of a field matches."""
    if element == "*":
        return range(low, high + 1)
    star = STAR_STEP.match(element)
    if star is not None:
        return range(low, high + 1, _step(star["step"], name))
    match = ELEMENT.match(element)
    if match is None or (match["end"] is None and match["step"] is not None):
        raise _invalid(name, element)
    start = _value(match["start"], name, low, high)
    if match["end"] is None:
        return [start]
    last = _value(match["end"], name, low, high)
    if start > last:
        raise ScheduleInputError("invalid_rule", f"cron.expression {name} field range {start}-{last} is inverted.")
    return range(start, last + 1, 1 if match["step"] is None else _step(match["step"], name))


def _field(raw: str, spec: tuple[str, int, int, int]) -> tuple[int, ...]:
    """The sorted values a field matches (day-of-week 7 folded onto 0)."""
    name, low, high, canonical_max = spec
    values: set[int] = set()
    for element in raw.split(","):
        if not element:
            raise ScheduleInputError(
                "invalid_rule", f"cron.expression {name} field must not contain an empty list element."
            )
        values.update(_element(element, name, low, high))
    return tuple(sorted({low if canonical_max != high and v == high else v for v in values}))


def parse_cron(expression: object) -> Cron:
    """A strict five-field expression: minute hour day-of-month month day-of-week."""
    if not isinstance(expression, str) or not expression or expression.strip() != expression:
        raise ScheduleInputError("invalid_rule", "cron.expression must be a non-empty trimmed string.")
    fields = re.split(r"\s+", expression)
    if len(fields) != 5:
        raise ScheduleInputError(
            "invalid_rule",
            "cron.expression must contain exactly five whitespace-separated fields: minute hour day-of-month month "
            "day-of-week.",
        )
    minute, hour, day, month = (_field(raw, spec) for raw, spec in zip(fields, FIELDS, strict=False))
    weekday = _field(fields[4], DAY_OF_WEEK)
    return Cron(
        " ".join(fields),
        minute,
        hour,
        frozenset(day),
        frozenset(month),
        frozenset(weekday),
        fields[2].startswith("*"),
        fields[4].startswith("*"),
    )


def next_cron(rule: Cron, zone: str, floor: int) -> int | None:
    """The first occurrence strictly after ``floor``, searched up to the horizon."""
    day = datetime.fromtimestamp(floor / 1000, ZoneInfo(zone)).date()
    return first_instant(day, zone, floor, lambda d: rule.times() if rule.matches(d) else ())


def latest_cron(rule: Cron, zone: str, decision: int, saved: int) -> int:
    """The latest occurrence at or before ``decision``, never earlier than the committed target."""
    day = datetime.fromtimestamp(decision / 1000, UTC).date() + timedelta(days=1)
    for _ in range(366 * CRON_HORIZON_YEARS):
        if rule.matches(day):
            for clock in reversed(rule.times()):
                candidate = wall_instant(day, clock, zone)
                if candidate is not None and candidate <= decision:
                    return max(candidate, saved)
        day -= timedelta(days=1)
    return saved
