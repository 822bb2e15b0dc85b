"""The page never shows false or missing information (issue 24, items 6 and 8): what a card, a chip or a marker
says is what ran, and failures (a stopped turn, a failed command, the server gone) are said where they happen."""

from __future__ import annotations

import json
from typing import Any

from tests.apps.web.browser.harness import PROVIDERS, WebServer, screenshot, unfold, wait_for
from tests.apps.web.browser.test_agents import DEPTH_2, TREE, open_tree
from tests.apps.web.browser.test_chat import send
from tests.apps.web.browser.test_composer import slow_text

MULTI = {
    "tool_calls": [
        {
            "name": "ask_user_question",
            "arguments": {
                "questions": [
                    {
                        "id": "q1",
                        "question": "Which checks should run?",
                        "multi_select": True,
                        "options": [{"label": "Lint"}, {"label": "Types"}, {"label": "Tests"}],
                    }
                ]
            },
        }
    ]
}
FAILING = "echo first\necho second\nexit 3"
TOOLS = {
    "tool_calls": [
        {"name": "bash", "arguments": {"command": FAILING, "description": "Print two lines, then fail"}},
        {"name": "bash", "arguments": {"command": "seq 1 30000", "description": "Count far"}},
        {"name": "grep", "arguments": {"pattern": "hello"}},
    ]
}


def header_config(server: Any, sid: str) -> dict[str, Any]:
    """The route of the session's first request."""
    return dict(server.events(sid, "request/header")[0]["data"]["header"]["config"])


def test_multi_select_question_takes_digits_while_the_composer_had_focus(web, browse):
    server = web([MULTI, {"text": "Running lint and tests."}])
    page = browse(server).page
    send(page, "Ask which checks to run")
    card = page.locator(".question-card")
    card.wait_for()
    assert card.locator("input[type=checkbox]").count() == 3
    page.keyboard.press("1")
    page.keyboard.press("3")
    assert page.input_value("#composer-input") == ""
    assert card.locator("input:checked").evaluate_all("inputs => inputs.map((i) => i.value)") == ["Lint", "Tests"]
    card.get_by_role("button", name="Submit").click()
    sid = server.session_ids()[0]
    wait_for(lambda: server.events(sid, "tool/result"), message="the answer")
    [result] = server.events(sid, "tool/result")
    answer = json.loads(result["data"]["message"]["content"][0]["text"])
    assert answer == {"answers": [{"id": "q1", "selected": ["Lint", "Tests"]}]}


def test_tool_cards_say_what_ran_and_how_it_ended(web, browse):
    server = web([TOOLS, {"text": "Done."}])
    page = browse(server).page
    send(page, "Run the tools")
    page.locator(".turn-end").wait_for()
    unfold(page)
    wait_for(lambda: page.locator(".tool-card .status").count() == 3, message="three tool cards")
    failing, long, grep = page.locator(".tool-card").all()
    assert failing.get_attribute("data-status") == "error"
    assert failing.locator(".status").inner_text().strip() == "exit 3"
    failing.locator(".tool-head").click()
    assert failing.locator(".bash-cmd").inner_text() == FAILING
    assert "[exit code: 3]" in failing.locator(".tool-output").inner_text()
    assert long.get_attribute("data-status") == "done"
    long.locator(".tool-head").click()
    note = long.locator(".tool-body .out-note")
    said = note.inner_text()
    assert said.startswith("Output truncated — only the end of the output was kept; full output: ")
    assert " KB in the middle are left out here; full result: " in said
    assert (
        long.evaluate("card => card.querySelector('.out-note').compareDocumentPosition(card.querySelector('pre'))") & 4
    )
    assert grep.locator(".tool-summary").inner_text() == "hello · 1 result"
    screenshot(page, "truth-tool-cards")


def test_a_stopped_text_only_turn_says_stopped(web, browse):
    server = web([slow_text("A long answer that will not finish " * 4, pieces=20)], pace_ms=300)
    page = browse(server).page
    send(page, "Write at length")
    page.locator(".answer.streaming").wait_for()
    page.locator(".stop-main").click()
    outcome = page.locator(".turn-outcome")
    outcome.wait_for()
    assert outcome.inner_text().strip() == "Stopped"
    sid = server.session_ids()[0]
    assert server.events(sid, "turn/end")[0]["data"]["reason"]["kind"] == "aborted"


EFFORTS = [
    {
        **PROVIDERS[0],
        "models": [
            {**m, "reasoningEfforts": ["off", "high", "max"], "defaultReasoningEffort": "high"}
            for m in PROVIDERS[0]["models"]
        ],
    }
]


def efforts_server(web: Any, scripts: list[Any]) -> WebServer:
    """A server whose models offer off / high / max with high as their default, as DeepSeek's do."""
    return web(scripts, ops=[{"id": "llm-replay", "config": {"scripts": scripts, "providers": EFFORTS}}])


def test_a_new_sessions_chips_are_the_route_it_runs(web, browse):
    server = efforts_server(web, [[{"text": "hi"}]])
    page = browse(server).page
    page.locator("#effort-select option").first.wait_for(state="attached")
    assert page.input_value("#effort-select") == "high"
    groups = page.eval_on_selector_all("#model-select optgroup", "groups => groups.map((g) => g.children.length)")
    assert groups and all(groups)
    send(page, "Say hi")
    page.locator(".turn-end").wait_for()
    sid = server.session_ids()[0]
    assert header_config(server, sid)["reasoningEffort"] == "high"


def test_settings_choose_the_default_model_and_effort(web, browse):
    server = efforts_server(web, [[{"text": "hi"}]])
    page = browse(server).page
    page.keyboard.press("Control+,")
    page.locator("#settings-tab-models").click()
    dialog = page.locator(".settings-dialog")
    dialog.get_by_label("Default model").select_option(label="deepseek-v4-pro")
    wait_for(lambda: page.input_value("#model-select").endswith("deepseek-v4-pro"), message="the composer's model")
    assert dialog.get_by_label("Default effort").input_value() == "high"
    dialog.get_by_label("Default effort").select_option("max")
    wait_for(lambda: page.input_value("#effort-select") == "max", message="the composer's effort")
    screenshot(page, "truth-settings-models")
    page.locator("#settings-tab-about").click()
    assert "Every plugin of the profile loaded." in dialog.locator(".panel-status").inner_text()
    page.keyboard.press("Escape")
    with server.client() as c:
        values = c.get("/api/settings").json()["values"]
    assert (values["models.defaultModel"], values["models.defaultEffort"]) == ("deepseek-v4-pro", "max")
    send(page, "Say hi")
    page.locator(".turn-end").wait_for()
    config = header_config(server, server.session_ids()[0])
    assert (config["model"], config["reasoningEffort"]) == ("deepseek-v4-pro", "max")


def test_server_gone_shows_reconnecting_and_keeps_the_draft(web, browse):
    server = web([{"text": "Back again."}])
    b = browse(server)
    page = b.page
    b.outage = True
    page.route("**/api/events*", lambda route: route.abort())
    b.context.set_offline(True)
    conn = page.locator("#conn")
    conn.wait_for()
    assert conn.inner_text() == "Reconnecting…"
    send(page, "Are you there?")
    error = page.locator(".composer-error")
    error.wait_for()
    assert "cannot be reached" in error.inner_text() and "kept" in error.inner_text()
    assert page.input_value("#composer-input") == "Are you there?"
    assert page.locator("#banner").is_hidden()
    screenshot(page, "truth-offline")
    b.context.set_offline(False)
    page.unroute("**/api/events*")
    conn.wait_for(state="hidden")
    b.end_outage()
    page.press("#composer-input", "Enter")
    page.locator(".turn-end").wait_for()
    assert error.is_hidden()


def title(page: Any, text: str) -> None:
    wait_for(lambda: page.locator("#session-title").inner_text() == text, message=f"title {text!r}")


def test_back_forward_and_address_edits_open_sessions(web, browse):
    server = web([[{"text": "A done."}], [{"text": "B done."}]])
    page = browse(server).page
    send(page, "Session A")
    page.locator(".turn-end").wait_for()
    title(page, "Session A")
    first = page.evaluate("location.hash")
    page.keyboard.press("Alt+n")
    title(page, "New session")
    send(page, "Session B")
    page.locator(".turn-end").wait_for()
    title(page, "Session B")
    page.go_back()
    title(page, "New session")
    page.go_back()
    title(page, "Session A")
    page.go_forward()
    title(page, "New session")
    page.evaluate(f"location.hash = {json.dumps(first)}")
    title(page, "Session A")
    assert page.locator(".user-msg .bubble").inner_text() == "Session A"


def test_user_message_blocks_are_a_blank_line_apart(web, browse):
    server = web([{"text": "Noted."}])
    page = browse(server).page
    send(page, "review")
    page.locator(".turn-end").wait_for()

    def two_blocks(route: Any) -> None:
        body = route.fetch().json()
        for event in body["events"]:
            if event["type"] == "user/message" and event["data"]["source"]["kind"] == "user":
                event["data"]["content"] = [{"type": "text", "text": "review"}, {"type": "text", "text": "Your notes"}]
        route.fulfill(json=body)

    page.route("**/events?*", two_blocks)
    page.reload()
    bubble = page.locator(".user-msg .bubble")
    bubble.wait_for()
    assert bubble.inner_text() == "review\n\nYour notes"


def test_breadcrumb_ancestors_open_their_sessions(web, browse):
    server = web(TREE, ops=DEPTH_2)
    page = browse(server).page
    send(page, "Delegate a scan and a review")
    wait_for(lambda: page.locator(".turn-end").count() >= 1, message="lead turn end")
    open_tree(page).locator(".agent-node[data-name='reviewer/checker']").click()
    crumb = page.locator("#breadcrumb")
    wait_for(lambda: crumb.locator("li").all_inner_texts() == ["lead", "reviewer", "checker"], message="checker crumb")
    assert crumb.locator("[aria-current=page]").inner_text() == "checker"
    checker = page.evaluate("location.hash")
    crumb.get_by_role("link", name="reviewer").click()
    wait_for(lambda: crumb.locator("li").all_inner_texts() == ["lead", "reviewer"], message="reviewer crumb")
    assert page.evaluate("location.hash") != checker
    crumb.get_by_role("link", name="lead").click()
    wait_for(crumb.is_hidden, message="the lead, which has no breadcrumb")
    assert page.locator(".user-msg .bubble").first.inner_text() == "Delegate a scan and a review"
    page.go_back()
    wait_for(lambda: crumb.locator("li").all_inner_texts() == ["lead", "reviewer"], message="back to reviewer")


def test_an_offline_sessions_kept_queued_prompt_is_shown_and_counted_in_the_sidebar(web, browse):
    first = web([[{"hang": True}]])
    page = browse(first).page
    send(page, "first")
    page.locator(".stop-main").wait_for()
    send(page, "kept for later")
    page.locator(".queue-chip").wait_for()
    sid = first.session_ids()[0]
    page.close()
    assert first.stop() == 0, first.stderr()
    second = WebServer(first.root, [])
    try:
        again = browse(second).page
        row = again.locator(f".session-row[data-session-id='{sid}']")
        assert row.locator(".badge-queued").inner_text() == "1 queued"
        row.click()
        chip = again.locator(".queue-chip")
        chip.wait_for()
        assert chip.locator(".queue-text").inner_text() == "kept for later"
    finally:
        assert second.stop() == 0, second.stderr()
