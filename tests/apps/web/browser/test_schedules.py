"""The reminders bar: a reminder the agent sets shows above the composer, and its Cancel button removes it."""

from __future__ import annotations

from tests.apps.web.browser.harness import screenshot, wait_for
from tests.apps.web.browser.test_chat import send

CREATE = {
    "tool_calls": [
        {
            "name": "schedule_create",
            "arguments": {"title": "Check the deploy", "prompt": "look at the deploy", "every_seconds": 3600},
        }
    ]
}


def test_a_reminder_shows_in_its_bar_and_is_cancelled_from_it(web, browse):
    server = web([CREATE, {"text": "Reminder set."}])
    page = browse(server).page
    send(page, "Remind me hourly")
    bar = page.locator("#schedules-slot")
    bar.locator(".schedules-toggle").wait_for()
    assert bar.locator(".schedules-count").inner_text() == "1"
    assert "Check the deploy" in bar.locator(".schedules-next").inner_text()
    bar.locator(".schedules-toggle").click()
    row = bar.locator(".schedule-row")
    assert row.count() == 1
    assert row.locator(".schedule-rule").inner_text().startswith("every 3600s · ")
    screenshot(page, "schedules")
    sid = server.session_ids()[0]
    (created,) = server.events(sid, "schedule/change")
    record_id = created["data"]["schedule"]["id"]
    row.get_by_role("button", name="Cancel reminder Check the deploy").click()
    wait_for(lambda: len(server.events(sid, "schedule/change")) == 2, message="the delete record")
    assert server.events(sid, "schedule/change")[1]["data"] == {"version": 1, "operation": "delete", "id": record_id}
    wait_for(bar.is_hidden, message="the bar to hide")
