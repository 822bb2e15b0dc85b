"""Timing selectors, occurrences and the ``schedule/change`` fold, without a host."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from pydsh.schedules import records
from pydsh.schedules.cron import parse_cron
from pydsh.schedules.records import Book, apply_change, build, occurrence
from pydsh.schedules.timing import ScheduleInputError, parse_iso

NOW = parse_iso("2030-03-30T12:00:00.000Z")  # a Saturday; Europe/Berlin springs forward the next night


def rule(selector: str, value: Any, now: int = NOW) -> dict[str, Any]:
    return build(records.head("schedule-1", "T", "p"), selector, value, now)


def refusal(selector: str, value: Any) -> tuple[str, str]:
    with pytest.raises(ScheduleInputError) as caught:
        rule(selector, value)
    return caught.value.code, caught.value.message


def test_each_selector_builds_the_reference_record_shape() -> None:
    assert list(rule("after_seconds", 5)) == ["id", "kind", "title", "prompt", "afterSeconds", "scheduledAt"]
    assert rule("at", "2030-03-31T01:30:00+02:00")["scheduledAt"] == "2030-03-30T23:30:00.000Z"
    local = rule("at", {"date": "2030-04-01", "time": "09:15:00.5", "time_zone": "Europe/Berlin"})
    assert local["scheduledAt"] == "2030-04-01T07:15:00.500Z"
    daily = rule("daily", {"time": "23:00:00", "time_zone": "Asia/Shanghai"})
    assert daily == {
        "id": "schedule-1",
        "kind": "daily",
        "title": "T",
        "prompt": "p",
        "time": "23:00:00.000",
        "timeZone": "Asia/Shanghai",
        "scheduledAt": "2030-03-30T15:00:00.000Z",
    }
    weekly = rule("weekly", {"time": "09:00:00", "time_zone": "UTC", "weekdays": [3, 1]})
    assert (weekly["weekdays"], weekly["scheduledAt"]) == ([1, 3], "2030-04-01T09:00:00.000Z")
    cron = rule("cron", {"expression": "*/15  9-17 * * 1-5", "time_zone": "UTC"})
    assert (cron["expression"], cron["scheduledAt"]) == ("*/15 9-17 * * 1-5", "2030-04-01T09:00:00.000Z")


def test_a_local_time_skipped_by_daylight_saving_is_refused_or_skipped() -> None:
    gap = {"date": "2030-03-31", "time": "02:30:00", "time_zone": "Europe/Berlin"}
    assert refusal("at", gap) == ("invalid_rule", "The local at time does not exist in the selected time zone.")
    daily = rule("daily", {"time": "02:30:00", "time_zone": "Europe/Berlin"})
    assert daily["scheduledAt"] == "2030-04-01T00:30:00.000Z"


def test_refused_rules_carry_the_reference_codes_and_texts() -> None:
    assert refusal("at", "2030-03-30 13:00") == (
        "invalid_rule",
        "at must use YYYY-MM-DDTHH:mm:ss with optional 1-3 digit fractional seconds and an explicit Z or numeric "
        "offset.",
    )
    assert refusal("at", "2030-02-30T10:00:00Z") == (
        "invalid_rule",
        "The at value must be a real ISO calendar date and time.",
    )
    assert refusal("weekly", {"time": "09:00:00", "time_zone": "UTC", "weekdays": [1, 1]}) == (
        "invalid_rule",
        "weekly.weekdays must not repeat weekday 1.",
    )
    assert refusal("cron", {"expression": "* * * *", "time_zone": "UTC"}) == (
        "invalid_rule",
        "cron.expression must contain exactly five whitespace-separated fields: minute hour day-of-month month "
        "day-of-week.",
    )
    assert refusal("cron", {"expression": "5-1 * * * *", "time_zone": "UTC"}) == (
        "invalid_rule",
        "cron.expression minute field range 5-1 is inverted.",
    )
    assert refusal("cron", {"expression": "x * * * *", "time_zone": "UTC"}) == (
        "invalid_rule",
        'cron.expression minute field element "x" must be *, a value, a-b, */n, a-b/n, or a comma-separated list of '
        "those.",
    )
    assert refusal("daily", {"time": "09:00:00"})[0] == "invalid_rule"


def test_cron_days_match_either_field_only_when_both_are_restricted() -> None:
    either = parse_cron("0 9 1 * 1")
    both = parse_cron("0 9 */2 * 1")
    assert either.matches(date(2030, 4, 8)) and either.matches(date(2030, 5, 1))
    assert not either.matches(date(2030, 4, 9))
    assert not both.matches(date(2030, 4, 8)) and both.matches(date(2030, 4, 1))
    assert parse_cron("0 0 * * 7").matches(date(2030, 4, 7))


def test_a_recurring_rule_delivers_only_its_latest_missed_occurrence() -> None:
    every = rule("every_seconds", 60)
    due = occurrence(every, NOW + 60_000 * 5 + 10)
    assert (due.at, due.next) == ("2030-03-30T12:05:00.000Z", "2030-03-30T12:06:00.000Z")
    daily = rule("daily", {"time": "08:00:00", "time_zone": "UTC"})
    late = occurrence(daily, parse_iso("2030-04-03T09:00:00.000Z"))
    assert (late.at, late.next) == ("2030-04-03T08:00:00.000Z", "2030-04-04T08:00:00.000Z")
    cron = rule("cron", {"expression": "30 6,18 * * *", "time_zone": "UTC"})
    missed = occurrence(cron, parse_iso("2030-04-02T19:00:00.000Z"))
    assert (missed.at, missed.next) == ("2030-04-02T18:30:00.000Z", "2030-04-03T06:30:00.000Z")


def test_the_fold_follows_creates_dispatches_updates_and_deletes() -> None:
    once, every = rule("after_seconds", 5), {**rule("every_seconds", 60), "id": "schedule-2"}
    book = Book()
    for change in (records.create_change(once), records.create_change(every)):
        book = apply_change(book, change)
    assert [r["id"] for r in book.listed()] == ["schedule-1", "schedule-2"]
    book = apply_change(book, records.dispatch_change(once, NOW + 6_000))
    assert "schedule-1" in book.ended and "schedule-1" not in book.active
    accepted = records.dispatch_change(every, NOW + 150_000)
    assert accepted == {
        "version": 1,
        "operation": "dispatch",
        "id": "schedule-2",
        "acceptedAt": "2030-03-30T12:02:30.000Z",
    }
    book = apply_change(book, accepted)
    assert book.active["schedule-2"]["scheduledAt"] == "2030-03-30T12:03:00.000Z"
    book = apply_change(book, records.update_change({**book.active["schedule-2"], "title": "U"}))
    assert book.active["schedule-2"]["title"] == "U"
    book = apply_change(book, records.delete_change("schedule-2"))
    assert book.active == {}
    assert apply_change(book, {"version": 1, "operation": "dispatch", "id": "nope"}) is book
