"""T12 agent tree and T13 message cards and Team panel (spec 12 §8.2)."""

from __future__ import annotations

import re
from typing import Any

from tests.apps.web.browser.harness import screenshot, unfold, wait_for
from tests.apps.web.browser.test_a11y import serious
from tests.apps.web.browser.test_chat import send

TEAMS = [{"id": "agent-teams", "disabled": False}, {"id": "tool-agent-team", "disabled": False}]
AGENT_MESSAGE = [{"id": "agent-message", "name": "agent-message"}]


def calls(*items: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(items)}


def delegate(description: str, name: str | None = None, *, background: bool = False) -> dict[str, Any]:
    args: dict[str, Any] = {"description": description, "prompt": description, "run_in_background": background}
    if name:
        args["name"] = name
    return calls({"name": "subagent", "arguments": args})


TREE = [
    [
        delegate("scan the repo"),
        delegate("review the change", "reviewer", background=True),
        {"text": "The review runs in the background."},
        {"text": "Noted."},
        {"text": "The reviewer finished."},
        {"text": "Nothing else to do."},
    ],
    [{"text": "Scanned."}],
    [
        delegate("check the details", "checker"),
        calls({"name": "send_message", "arguments": {"agent": "lead", "message": "The review looks good to me."}}),
        {"text": "Reviewed."},
    ],
    [{"text": "Checked."}],
]
DEPTH_2 = [{"id": "subagent", "config": {"maxDepth": 2}}]


def open_tree(page: Any) -> Any:
    chip = page.locator(".agents-chip")
    wait_for(lambda: chip.is_visible() and chip.inner_text().strip() == "Agents · 3", message="Agents · 3 chip")
    chip.click()
    return page.locator("#agents-popover")


def test_t12_agent_tree_names_models_and_member_view(web, browse):
    server = web(TREE, ops=DEPTH_2)
    page = browse(server).page
    send(page, "Delegate a scan and a review")
    wait_for(lambda: page.locator(".turn-end").count() >= 1, message="lead turn end")
    popover = open_tree(page)
    names = popover.locator(".agent-name").all_inner_texts()
    assert names == ["lead", "agent-1", "reviewer", "reviewer/checker"]
    for node in popover.locator(".agent-node").all():
        assert "deepseek-v4-flash" in node.locator(".agent-model").inner_text()
        assert node.locator(".agent-state").inner_text()
    screenshot(page, "agents")
    popover.locator(".agent-node[data-name='reviewer/checker']").click()
    crumbs = page.locator("#breadcrumb li")
    crumbs.first.wait_for()
    assert crumbs.all_inner_texts() == ["lead", "reviewer", "checker"]
    assert page.get_by_role("button", name="Interrupt").is_visible()
    assert not page.locator("#composer-input").is_visible()
    checker = page.evaluate("decodeURIComponent(location.hash.split('/').pop())")
    with server.client() as c:
        refused = c.post(f"/api/sessions/{checker}/prompt", json={"text": "hello", "mode": "queue"})
    assert refused.status_code == 409


def test_t13_message_cards_open_the_sender(web, browse):
    server = web(TREE, ops=DEPTH_2)
    page = browse(server).page
    send(page, "Delegate a scan and a review")
    card = page.locator(".message-card", has_text="The review looks good to me.")
    card.wait_for()
    assert card.locator(".from-btn").inner_text() == "From reviewer"
    assert "sent a message" not in card.inner_text()
    assert page.locator(".user-msg", has_text="The review looks good to me.").count() == 0
    screenshot(page, "messages")
    card.locator(".from-btn").click()
    wait_for(
        lambda: page.locator("#breadcrumb li").all_inner_texts() == ["lead", "reviewer"], message="reviewer opened"
    )


def test_t13_cross_session_message_card_names_the_sender_title(web, browse):
    send_to = calls(
        {
            "name": "send_agent_message",
            "arguments": {"to": "{{fromRequest:session ([0-9a-f-]{36})}}", "content": "Please rerun the tests."},
        }
    )
    server = web([[{"text": "B is ready."}, {"text": "Will do."}], [send_to, {"text": "Sent."}]], extra=AGENT_MESSAGE)
    page = browse(server).page
    send(page, "Wait for messages")
    page.locator(".turn-end").wait_for()
    b_id = page.evaluate("decodeURIComponent(location.hash.split('/').pop())")
    page.locator("#new-session").click()
    send(page, f"Message session {b_id} about the tests")
    wait_for(lambda: page.evaluate("location.hash.split('/').pop()") not in ("", b_id), message="session A opened")
    a_id = page.evaluate("decodeURIComponent(location.hash.split('/').pop())")
    page.locator(".turn-end").wait_for()
    with server.client() as c:
        a_title = c.get(f"/api/sessions/{a_id}").json()["session"]["title"]
    page.locator(f".session-row[data-session-id='{b_id}']").click()
    card = page.locator(".message-card", has_text="Please rerun the tests.")
    card.wait_for()
    assert card.locator(".from-btn").inner_text() == f"From Session · {a_title}"
    assert "dsh-agent-message" not in card.inner_text()
    assert card.evaluate("e => getComputedStyle(e).marginLeft") == "0px"
    card.locator(".from-btn").focus()
    page.keyboard.press("Enter")
    wait_for(lambda: page.evaluate("decodeURIComponent(location.hash.split('/').pop())") == a_id, message="A opened")


def test_t13_team_panel_shows_member_and_task_moving_live(web, browse):
    spawn = calls(
        {"name": "spawn_teammate", "arguments": {"name": "grader", "description": "grade", "prompt": "grade it"}}
    )
    task = calls({"name": "team_task_create", "arguments": {"subject": "Grade the work", "description": "grade it"}})
    claim = calls(
        {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 1, "action": "claim"}}
    )
    server = web(
        [[spawn, task, claim, {"text": "Team at work."}, {"text": "ok"}, {"text": "ok"}], [{"text": "graded"}] * 3],
        ops=TEAMS,
        pace_ms=60,
    )
    page = browse(server).page
    send(page, "Build a team")
    panel = page.locator(".panel-slot[data-panel=team]")
    panel.locator(".team-member[data-name=grader]").wait_for()
    assert "deepseek-v4-flash" in panel.locator(".team-member[data-name=grader]").inner_text()
    panel.locator(".task-column[data-status=in_progress] .task-card[data-task-id=task-1]").wait_for()
    assert "Grade the work" in panel.inner_text()


def test_send_card_shows_a_selectable_message_id_live_state_and_plugin_toggles(web, browse):
    send_to = calls(
        {
            "name": "send_agent_message",
            "arguments": {"to": "{{fromRequest:session ([0-9a-f-]{36})}}", "content": "Please rerun the tests."},
        }
    )
    server = web([[{"text": "B is ready."}, {"text": "Will do."}], [send_to, {"text": "Sent."}]], extra=AGENT_MESSAGE)
    b = browse(server)
    page = b.page
    b.context.grant_permissions(["clipboard-read", "clipboard-write"])
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if r.url.endswith("/messages") else None)
    send(page, "Wait for messages")
    page.locator(".turn-end").wait_for()
    b_id = page.evaluate("decodeURIComponent(location.hash.split('/').pop())")
    page.locator("#new-session").click()
    assert page.locator("#copy-id").is_hidden()
    send(page, f"Message session {b_id} about the tests")
    wait_for(lambda: page.evaluate("location.hash.split('/').pop()") not in ("", b_id), message="session A opened")
    a_id = page.evaluate("decodeURIComponent(location.hash.split('/').pop())")
    page.locator(".turn-end").wait_for()
    unfold(page)
    card = page.locator(".tool-card[data-tool=send_agent_message]")
    wait_for(lambda: card.locator(".tool-summary").inner_text().endswith("· claimed"), message="claimed pushed live")
    assert [u for u in fetched if a_id in u] == [f"{server.origin}/api/sessions/{a_id}/messages"]
    [result] = [e for e in server.events(a_id, "tool/result")]
    message_id = result["data"]["meta"]["messageId"]
    card.locator(".tool-head").click()
    shown = card.locator(".message-id")
    assert shown.inner_text() == message_id
    assert shown.evaluate("e => getComputedStyle(e).userSelect") == "all"
    page.keyboard.press("Control+,")
    dialog = page.locator("dialog.settings-dialog")
    dialog.get_by_role("tab", name="Plugin configuration").click()
    dialog.get_by_label("Show the delivery mode").check()
    dialog.get_by_label("Show the target session's runtime status").check()
    summary = card.locator(".tool-summary")
    shows = re.compile(r"· claimed · mode followup · target (running|idle)$")  # the target's turn may still run
    wait_for(lambda: shows.search(summary.inner_text()), message="mode, target")
    assert not serious(page, "plugin configuration")
    page.keyboard.press("Escape")
    with server.client() as c:
        values = c.get("/api/settings").json()["values"]
    assert values["agentMessage.showMode"] is True and values["agentMessage.showTargetStatus"] is True
    copy = page.get_by_role("button", name="Copy ID of this session")
    copy.click()
    wait_for(lambda: copy.inner_text() == "Copied", message="Copy ID says Copied")
    assert page.evaluate("navigator.clipboard.readText()") == a_id
    screenshot(page, "message-delivery")
