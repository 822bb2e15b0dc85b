"""When a reminder is due: strict parsing of its timing selectors and the occurrence arithmetic.

Every texts of a refused selector is DeepSeek Harness's own (its ``dsh-schedule`` package), since the
model reads them as tool results. Instants are epoch milliseconds; stored instants are canonical UTC
strings (``2026-01-02T03:04:05.000Z``). Local wall-clock times that do not exist in a zone (a DST gap)
are skipped and repeated ones resolve to the earlier instant, as the reference does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydsh.kernel.errors import PydshError

MIN_MS = int(datetime(1, 1, 1, tzinfo=UTC).timestamp() * 1000)
MAX_MS = int(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC).timestamp() * 1000)
CRON_HORIZON_YEARS = 8
"""How far ahead a cron rule is searched before it counts as never matching again."""

OFFSET_INSTANT = re.compile(
    r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})T(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})"
    r"(?:\.(?P<fraction>\d{1,3}))?(?P<zone>Z|(?P<sign>[+-])(?P<oh>\d{2}):(?P<om>\d{2}))$"
)
LOCAL_DATE = re.compile(r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})$")
LOCAL_TIME = re.compile(r"^(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})(?:\.(?P<fraction>\d{1,3}))?$")
CLOCK_TIME = re.compile(r"^(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,3})?$")
IANA_ZONE = re.compile(r"^[A-Za-z][A-Za-z0-9_+.-]*(?:/[A-Za-z0-9_+.-]+)+$")
ZONE_TEXT = "time_zone must be UTC or a valid IANA Area/Location name."
INSTANT_RANGE_TEXT = "The scheduled time must be representable as a four-digit-year RFC 3339 UTC instant."


class ScheduleInputError(PydshError):
    """A reminder rule the model (or a person) supplied that cannot become a record; ``code`` is public."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def iso(ms: int) -> str:
    """The canonical UTC form of an instant: milliseconds and a ``Z``."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_iso(value: str) -> int:
    """Epoch milliseconds of a canonical UTC instant written by :func:`iso`."""
    moment = datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _fraction(text: str | None) -> int:
    return 0 if text is None else int(text.ljust(3, "0"))


def future_instant(target: int, now: int) -> str:
    """``target`` as a stored instant, refused unless it is representable and strictly after ``now``."""
    if target < MIN_MS or target > MAX_MS:
        raise ScheduleInputError("time_out_of_range", INSTANT_RANGE_TEXT)
    if target <= now:
        raise ScheduleInputError("not_future", "The scheduled time must be strictly in the future.")
    return iso(target)


def canonical_zone(value: str) -> str:
    """``UTC`` or an IANA Area/Location zone the system knows; anything else is ``invalid_time_zone``."""
    if not value or value.strip() != value or (value != "UTC" and not IANA_ZONE.match(value)):
        raise ScheduleInputError("invalid_time_zone", ZONE_TEXT)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleInputError("invalid_time_zone", ZONE_TEXT) from exc
    return value


def wall_instant(day: date, clock: time, zone: str) -> int | None:
    """The instant of a local wall-clock time, the earlier of a repeated one, or None inside a DST gap."""
    local = datetime.combine(day, clock)
    zoned = local.replace(tzinfo=ZoneInfo(zone), fold=0)
    if zoned.astimezone(UTC).astimezone(ZoneInfo(zone)).replace(tzinfo=None) != local:
        return None
    return _ms(zoned)


def _local_day(ms: int, zone: str) -> date:
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).date()


def _calendar(fields: list[int], text: str) -> datetime:
    """A real calendar date and time (year month day hour minute second, no normalisation of 31 February),
    else ``invalid_rule`` ``text``."""
    if fields[0] == 0:
        raise ScheduleInputError("invalid_rule", text)
    try:
        year, month, day, hour, minute, second = fields
        return datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise ScheduleInputError("invalid_rule", text) from exc


def parse_offset_instant(value: str) -> int:
    """An RFC 3339 date-time with ``Z`` or a numeric offset."""
    match = OFFSET_INSTANT.match(value)
    if match is None:
        raise ScheduleInputError(
            "invalid_rule",
            "at must use YYYY-MM-DDTHH:mm:ss with optional 1-3 digit fractional seconds and an explicit Z or "
            "numeric offset.",
        )
    g = {k: v for k, v in match.groupdict().items()}
    real = "The at value must be a real ISO calendar date and time."
    fields = [int(g[k]) for k in ("year", "month", "day", "hour", "minute", "second")]
    local = _calendar(fields, real)
    epoch = _ms(local.replace(tzinfo=UTC)) + _fraction(g["fraction"])
    if g["zone"] == "Z":
        return epoch
    oh, om = int(g["oh"]), int(g["om"])
    if oh > 23 or om > 59 or (g["sign"] == "-" and oh == 0 and om == 0):
        raise ScheduleInputError("invalid_rule", "The at numeric offset is invalid.")
    return epoch - (1 if g["sign"] == "+" else -1) * (oh * 60 + om) * 60_000


def parse_local_at(value: dict[str, object]) -> int:
    """A local date and time in an explicit zone (``{"date", "time", "time_zone"}``)."""
    if set(value) != {"date", "time", "time_zone"}:
        raise ScheduleInputError("invalid_rule", "Local at must contain exactly date, time, and time_zone.")
    if not isinstance(value["date"], str) or not isinstance(value["time"], str):
        raise ScheduleInputError("invalid_rule", "Local at date and time must be strings.")
    if not isinstance(value["time_zone"], str):
        raise ScheduleInputError("invalid_time_zone", "time_zone must be a string.")
    day, clock = LOCAL_DATE.match(value["date"]), LOCAL_TIME.match(value["time"])
    if day is None or clock is None:
        raise ScheduleInputError(
            "invalid_rule",
            "Local at requires date YYYY-MM-DD and time HH:mm:ss with optional one-to-three digit milliseconds.",
        )
    real = "The local at value must be a real ISO calendar date and time."
    fields = [int(day[k]) for k in ("year", "month", "day")] + [int(clock[k]) for k in ("hour", "minute", "second")]
    local = _calendar(fields, real)
    zone = canonical_zone(value["time_zone"])
    millis = timedelta(milliseconds=_fraction(clock["fraction"]))
    target = wall_instant(local.date(), (local + millis).time(), zone)
    if target is None:
        raise ScheduleInputError("invalid_rule", "The local at time does not exist in the selected time zone.")
    return target


def parse_at(value: object) -> int:
    """The instant of an ``at`` selector: an offset string or a local calendar object."""
    if isinstance(value, str):
        return parse_offset_instant(value)
    if isinstance(value, dict):
        return parse_local_at(value)
    raise ScheduleInputError("invalid_rule", "at must be an explicit-offset string or local calendar object.")


def clock_time(value: str, selector: str) -> str:
    """A strict ``HH:mm:ss[.SSS]`` local time, normalised to ``HH:mm:ss.SSS``."""
    if not CLOCK_TIME.match(value):
        raise ScheduleInputError(
            "invalid_rule",
            f"{selector}.time must use HH:mm:ss with optional 1-3 fractional digits, without leap seconds or 24:00.",
        )
    head, _, fraction = value.partition(".")
    return f"{head}.{fraction.ljust(3, '0') if fraction else '000'}"


def weekdays_of(value: object) -> list[int]:
    """A non-empty set of ISO weekdays (1 Monday .. 7 Sunday), ascending, without repetitions."""
    if not isinstance(value, list) or not value:
        raise ScheduleInputError("invalid_rule", "weekly.weekdays must be a non-empty array of ISO weekday numbers.")
    seen: set[int] = set()
    for day in value:
        if isinstance(day, bool) or not isinstance(day, int | float) or day != int(day) or not 1 <= day <= 7:
            raise ScheduleInputError(
                "invalid_rule", "Each weekly.weekdays entry must be an integer from 1 (Monday) through 7 (Sunday)."
            )
        if int(day) in seen:
            raise ScheduleInputError("invalid_rule", f"weekly.weekdays must not repeat weekday {int(day)}.")
        seen.add(int(day))
    return sorted(seen)


def next_matching(clock: time, zone: str, now: int, matches: Callable[[date], bool], after: date | None) -> int | None:
    """The first occurrence of ``clock`` on a matching local date strictly after ``now`` (and after ``after``)."""
    day = _local_day(now, zone)
    if after is not None and day <= after:
        day = after + timedelta(days=1)
    return first_instant(day, zone, now, lambda d: (clock,) if matches(d) else ())


def first_instant(day: date, zone: str, floor: int, clocks: Callable[[date], Iterable[time]]) -> int | None:
    """The first wall-clock instant strictly after ``floor`` among each local date's ``clocks``, from ``day`` on
    and up to the horizon (``None`` past it or beyond the latest instant a reminder may hold)."""
    for _ in range(366 * CRON_HORIZON_YEARS):
        for clock in clocks(day):
            target = wall_instant(day, clock, zone)
            if target is not None and target > MAX_MS:
                return None
            if target is not None and target > floor:
                return target
        day += timedelta(days=1)
    return None


def latest_due(clock: time, zone: str, decision: int, saved: int, matches: Callable[[date], bool]) -> int:
    """The latest occurrence at or before ``decision``, never earlier than the committed target ``saved``."""
    day = datetime.fromtimestamp(decision / 1000, UTC).date() + timedelta(days=1)
    for _ in range(366 * CRON_HORIZON_YEARS):
        if matches(day):
            candidate = wall_instant(day, clock, zone)
            if candidate is not None and candidate <= decision:
                return max(candidate, saved)
        day -= timedelta(days=1)
    return saved


@dataclass(frozen=True)
class Occurrence:
    """One due occurrence of a recurring rule and the next target (None when it has none left)."""

    at: str
    next: str | None


def every_occurrence(scheduled_at: str, every_seconds: int, decision: int) -> Occurrence:
    """Fixed-rate: the latest anchor-aligned occurrence due at ``decision`` and the one after it."""
    target, interval = parse_iso(scheduled_at), every_seconds * 1000
    occurrence = target + max(0, (decision - target) // interval) * interval
    following = occurrence + interval
    return Occurrence(iso(occurrence), iso(following) if following <= MAX_MS else None)


def calendar_occurrence(
    scheduled_at: str, clock: time, zone: str, decision: int, matches: Callable[[date], bool]
) -> Occurrence:
    """Daily, weekly or cron at one time: the latest missed occurrence only, then the next on a later date."""
    occurrence = latest_due(clock, zone, decision, parse_iso(scheduled_at), matches)
    following = next_matching(clock, zone, decision, matches, _local_day(occurrence, zone))
    return Occurrence(iso(occurrence), None if following is None else iso(following))


def every_day(_day: date) -> bool:
    """A daily rule's date filter."""
    return True


def on_weekdays(weekdays: Iterable[int]) -> Callable[[date], bool]:
    """A weekly rule's date filter."""
    chosen = set(weekdays)
    return lambda day: day.isoweekday() in chosen
