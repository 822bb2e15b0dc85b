"""T7 approvals, T8 questions and T11 todos (spec 12 §8.2)."""

from __future__ import annotations

import json
from typing import Any

from tests.apps.web.browser.harness import screenshot, wait_for
from tests.apps.web.browser.test_chat import send
from tests.apps.web.conftest import ESCALATE

ASK = {
    "tool_calls": [
        {
            "name": "ask_user_question",
            "arguments": {
                "questions": [
                    {
                        "id": "q1",
                        "header": "Choose",
                        "question": "Which colour?",
                        "options": [
                            {"label": "Blue (Recommended)", "description": "Calm and readable."},
                            {"label": "Red"},
                        ],
                    }
                ]
            },
        }
    ]
}


def tab_to(page: Any, label: str, limit: int = 80) -> None:
    """Press Tab until the focused element's text is `label` (keyboard only)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()") == label:
            return
    raise AssertionError(f"{label!r} is not reachable with Tab")


def tool_results(server: Any, sid: str) -> list[str]:
    return [
        "".join(b.get("text", "") for b in e["data"]["message"]["content"]) for e in server.events(sid, "tool/result")
    ]


def test_t7_approval_by_keyboard_survives_reload_and_rejects(web, browse):
    server = web([ESCALATE, {"text": "ran it"}, ESCALATE, {"text": "stopped"}])
    page = browse(server).page
    send(page, "Run a command that needs approval")
    card = page.locator(".approval-card")
    card.wait_for()
    assert "demo of the approval card" in card.inner_text()
    assert "echo escalated" in card.locator(".approval-preview").inner_text()
    page.locator(".session-row .badge-approval").wait_for()
    assert page.locator(".session-row .badge-approval").inner_text() == "Approval"
    screenshot(page, "approval")
    page.reload()
    card.wait_for()
    tab_to(page, "Allow once")
    page.keyboard.press("Enter")
    card.wait_for(state="detached")
    page.locator(".turn-end").wait_for()
    wait_for(lambda: page.locator(".session-row .badge-approval").count() == 0, message="badge gone")
    sid = server.session_ids()[0]
    events = server.events(sid)
    kinds = [e["type"] for e in events]
    asked = kinds.index("approval/asked")
    decided = kinds.index("approval/decided")
    assert asked < decided
    assert events[decided]["data"]["outcome"] == "allowed-once"
    assert "escalated" in tool_results(server, sid)[0]
    with server.client() as c:
        again = c.post(f"/api/sessions/{sid}/approvals/{events[asked]['data']['id']}", json={"outcome": "allowed-once"})
    assert again.status_code == 409
    send(page, "Run it again")
    card.wait_for()
    card.get_by_role("button", name="Reject").click()
    wait_for(lambda: len(server.events(sid, "turn/end")) == 2, message="second turn end")
    assert "the user rejected escalating this command" in tool_results(server, sid)[1]


def answer_of(server: Any, sid: str, n: int) -> Any:
    wait_for(lambda: len(server.events(sid, "tool/result")) > n, message="question result")
    return json.loads(tool_results(server, sid)[n])


def test_t8_question_keys_submit_custom_and_skip(web, browse):
    server = web([ASK, {"text": "Blue it is"}, ASK, {"text": "custom"}, ASK, {"text": "skipped"}])
    page = browse(server).page
    send(page, "Ask me a question")
    card = page.locator(".question-card")
    card.wait_for()
    assert card.locator(".tag").inner_text() == "Recommended"
    page.locator(".session-row .badge-answer").wait_for()
    assert page.locator(".session-row .badge-answer").inner_text() == "Answer"
    page.locator("#conversation").focus()
    page.keyboard.press("1")
    assert card.locator("input[value='Blue (Recommended)']").is_checked()
    screenshot(page, "question")
    card.get_by_role("button", name="Submit").click()
    sid = server.session_ids()[0]
    assert answer_of(server, sid, 0) == {"answers": [{"id": "q1", "selected": ["Blue (Recommended)"]}]}
    page.locator(".turn-end").wait_for()
    send(page, "Ask again")
    card.wait_for()
    card.get_by_label("Your own answer").fill("Green")
    card.get_by_role("button", name="Submit").click()
    assert answer_of(server, sid, 1) == {"answers": [{"id": "q1", "selected": [], "custom": "Green"}]}
    wait_for(lambda: page.locator(".turn-end").count() == 2, message="second turn end")
    send(page, "Ask once more")
    card.wait_for()
    card.get_by_role("button", name="Skip").click()
    assert answer_of(server, sid, 2) == {"answers": [{"id": "q1", "selected": []}]}


def test_t11_todos_bar_counts_and_expands(web, browse):
    todos = [
        {"content": "Write the plan", "status": "completed"},
        {"content": "Build the page", "status": "in_progress"},
        {"content": "Ship it", "status": "pending"},
    ]
    server = web([{"tool_calls": [{"name": "todo_write", "arguments": {"todos": todos}}]}, {"text": "Planned."}])
    page = browse(server).page
    send(page, "Make a plan")
    bar = page.locator("#todos-slot")
    bar.locator(".todos-counts").wait_for()
    assert bar.locator(".todos-counts").inner_text() == "1 completed · 1 in progress · 1 pending"
    assert "Build the page" in bar.inner_text()
    bar.locator(".todos-toggle").click()
    assert bar.locator("li").count() == 3
