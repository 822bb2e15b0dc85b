"""The goal chip in the session header and the plan review card (issue 27): fed from the session's log."""

from __future__ import annotations

from typing import Any

from pydsh.plan.mode import APPROVED
from tests.apps.web.browser.goal_plugins import FIXED_GOAL_ID, GOAL_ID, PLAN_MODE_AT_START
from tests.apps.web.browser.harness import screenshot, wait_for
from tests.apps.web.browser.test_a11y import serious
from tests.apps.web.browser.test_cards import ASK, tool_results
from tests.apps.web.browser.test_chat import send

PLAN = "# Tidy the notes\n\n1. **Sort** the notes by date\n2. Remove the duplicates\n"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def chip_text(page: Any) -> str:
    return " ".join(page.locator("#goal-slot .goal-chip span:not(.icon)").all_inner_texts())


def test_the_goal_chip_follows_create_rounds_and_complete_and_survives_reload(web, browse):
    script = [
        call("create_goal", objective="Tidy the notes", max_goal_rounds=5),
        {"text": "Goal set."},
        ASK,  # the first automatic round waits on a question, so the active chip can be seen
        call("update_goal", goal_id=GOAL_ID, revision=1, action="complete"),
        {"text": "All done."},
    ]
    server = web(script, extra=FIXED_GOAL_ID)
    page = browse(server).page
    assert page.locator("#goal-slot").is_hidden()
    send(page, "Keep going until the notes are tidy")
    page.locator(".question-card").wait_for()
    wait_for(lambda: chip_text(page) == "Ongoing goal Tidy the notes round 1 of 5", message="active chip")
    page.locator(".notice-row summary", has_text="Goal · Round 1").wait_for()  # the chip can come first
    assert page.locator(".notice-row summary", has_text="Goal · Round 1").count() == 1
    chip = page.locator(".goal-chip")
    assert chip.get_attribute("aria-label") == "Ongoing goal: Tidy the notes · round 1 of 5"
    assert serious(page, "goal chip and question card") == []
    screenshot(page, "goal-active")
    page.locator(".question-card").get_by_role("button", name="Skip").click()
    wait_for(lambda: chip_text(page) == "Completed goal Tidy the notes round 1 of 5", message="complete chip")
    sid = server.session_ids()[0]
    phases = [e["data"]["goal"]["phase"] for e in server.events(sid, "goal/change")]
    assert phases == ["active", "complete"]
    page.reload()
    wait_for(lambda: chip_text(page) == "Completed goal Tidy the notes round 1 of 5", message="chip after reload")


def test_the_plan_review_card_shows_the_plan_as_markdown_and_approves_by_keyboard(web, browse):
    server = web([call("exit_plan_mode", plan=PLAN), {"text": "Carrying it out."}], extra=PLAN_MODE_AT_START)
    page = browse(server).page
    send(page, "Plan how to tidy the notes")
    card = page.locator(".question-card")
    card.wait_for()
    plan = card.get_by_role("region", name="Plan review: details")
    assert plan.locator("h3").inner_text() == "Tidy the notes"
    assert plan.locator("strong").inner_text() == "Sort"
    assert plan.locator("li").count() == 2
    assert serious(page, "plan review card") == []
    screenshot(page, "plan-review")
    page.locator("#conversation").focus()
    page.keyboard.press("1")
    assert card.locator("input[value='Approve']").is_checked()
    card.get_by_role("button", name="Submit").click()
    sid = server.session_ids()[0]
    wait_for(lambda: tool_results(server, sid) == [APPROVED], message="plan approved")
    assert [e["data"] for e in server.events(sid, "plan/mode")] == [{"active": True}, {"active": False}]
