"""The composer's completion (spec 12 F29 and the session reference): "@" offers other sessions and workspace
files, told apart; a referenced session reaches the agent as its id and a read-only snapshot without being
woken; "/" offers the session's commands, which run."""

from __future__ import annotations

from typing import Any

from pydsh.apps.web.api import PAGE_SIZE as SIDEBAR_FIRST_PAGE
from pydsh.apps.web.views import WORKSPACE_FIRST
from tests.apps.web.browser.harness import screenshot, wait_for
from tests.apps.web.browser.test_a11y import serious
from tests.apps.web.browser.test_chat import send


def current_id(page: Any) -> str:
    return str(page.evaluate("decodeURIComponent(location.hash.split('/').pop())"))


def first_send(page: Any, text: str) -> None:
    """Send once the index stream named the workspaces (a draft needs one to start in)."""
    page.locator(".workspace").first.wait_for()
    send(page, text)
    page.locator(".turn-end").wait_for()


def options(page: Any) -> list[tuple[str, str]]:
    """(kind tag, label) of every suggestion shown."""
    rows = page.locator("#composer-completion [role=option]")
    return [
        (r.locator(".completion-tag").inner_text(), r.locator(".completion-label").inner_text()) for r in rows.all()
    ]


def test_at_offers_sessions_and_files_and_a_reference_reaches_the_agent(web, browse):
    seen = {"text": "Seen {{fromRequest:Its stable session id is ([0-9a-f-]{36})}}"}
    server = web([[{"text": "The hello release is planned."}], [seen]])
    page = browse(server).page
    first_send(page, "Plan the hello release")
    target = current_id(page)
    before = len(server.events(target))
    page.locator("#new-session").click()
    box = page.locator("#composer-input")
    box.fill("What did ")
    box.press_sequentially("@hel")
    popup = page.locator("#composer-completion")
    wait_for(lambda: ("File", "hello.txt") in options(page), message="file suggestion")
    assert options(page)[0] == ("Session", "Plan the hello release")
    assert (
        popup.get_by_role("group", name="Sessions").is_visible()
        and popup.get_by_role("group", name="Files").is_visible()
    )
    assert box.get_attribute("aria-activedescendant") == "completion-0"
    assert not serious(page, "composer completion")
    screenshot(page, "composer-completion")
    box.press("Enter")
    chip = page.locator(".reference-chip")
    chip.wait_for()
    assert chip.inner_text().replace("\n", " ").strip() == "Session Plan the hello release"
    assert popup.is_hidden()
    box.press_sequentially("plan, see @hel")
    wait_for(lambda: ("File", "hello.txt") in options(page), message="file suggestion again")
    box.press("ArrowDown")
    box.press("Tab")
    assert box.input_value() == "What did plan, see @hello.txt "
    box.press("Enter")
    wait_for(lambda: current_id(page) not in ("", target), message="new session opened")
    sid = current_id(page)
    row = page.locator(".reference-row")
    row.wait_for()
    assert "Referenced session · Plan the hello release" in row.inner_text()
    page.locator(".answer", has_text=f"Seen {target}").wait_for()
    screenshot(page, "session-reference")
    prompt, recall = [e["data"] for e in server.events(sid, "user/message")][:2]
    assert prompt["source"]["sessionReferences"] == [target]
    assert prompt["content"][0]["text"] == "What did plan, see @hello.txt "
    assert recall["source"]["kind"] == "session-reference" and recall["source"]["sessionId"] == target
    assert len(server.events(target)) == before
    assert page.locator(".reference-chip").count() == 0


def test_escape_closes_and_a_chip_can_be_removed(web, browse):
    server = web([[{"text": "first"}], [{"text": "second"}]])
    page = browse(server).page
    first_send(page, "First session")
    page.locator("#new-session").click()
    box = page.locator("#composer-input")
    box.press_sequentially("@First")
    wait_for(lambda: ("Session", "First session") in options(page), message="session suggestion")
    box.press("Escape")
    assert page.locator("#composer-completion").is_hidden()
    box.press_sequentially(" ")
    box.press_sequentially("@First")
    page.locator("#composer-completion [data-kind=session]").click()
    page.get_by_role("button", name="Remove reference to First session").click()
    assert page.locator(".reference-chip").count() == 0
    assert box.evaluate("e => e === document.activeElement")


def test_slash_offers_the_session_commands_and_runs_them(web, browse):
    server = web([{"text": "Hello back."}, {"text": "summary of the conversation"}])
    page = browse(server).page
    first_send(page, "Hello")
    sid = current_id(page)
    box = page.locator("#composer-input")
    box.press_sequentially("/")
    wait_for(lambda: options(page), message="command suggestions")
    assert [label for _tag, label in options(page)] == ["/compact", "/schedule", "/model", "/permission", "/export"]
    assert {tag for tag, _label in options(page)} == {"Command"}
    box.press_sequentially("perm")
    box.press("Enter")
    assert box.input_value() == "/permission "
    wait_for(lambda: ("Option", "read-only") in options(page), message="preset options")
    box.press_sequentially("read")
    box.press("Enter")
    assert box.input_value() == "/permission read-only"
    assert page.locator("#composer-completion").is_hidden()
    box.press("Enter")
    wait_for(
        lambda: any(e["data"] == {"preset": "read-only"} for e in server.events(sid, "permission/preset")),
        message="permission/preset",
    )
    assert page.locator("#permission-select").input_value() == "read-only"
    assert box.input_value() == ""
    box.press_sequentially("/comp")
    box.press("Enter")
    assert box.input_value() == "/compact"
    box.press("Enter")
    wait_for(lambda: server.events(sid, "command/done"), message="compaction command ran")
    assert server.events(sid, "command/run")[0]["data"]["name"] == "compact"
    box.press_sequentially("/export")
    box.press("Escape")
    with page.expect_download() as info:
        box.press("Enter")
    assert info.value.suggested_filename == f"{sid}.session.v4.jsonl"


def test_at_finds_sessions_the_sidebar_has_not_loaded(web, browse):
    server = web([[{"text": "Noted."}]])
    with server.client() as client:
        body = {"cwd": str(server.workspace), "prompt": {"text": "Needle in the haystack"}}
        needle = client.post("/api/sessions", json=body).json()["session"]["sessionId"]
        wait_for(lambda: server.events(needle, "turn/end"), message="the needle's answer")
        for _ in range(SIDEBAR_FIRST_PAGE + WORKSPACE_FIRST):
            assert client.post("/api/sessions", json={"cwd": str(server.workspace)}).status_code == 201
    page = browse(server).page
    page.locator(".workspace").first.wait_for()
    assert page.locator(f".session-row[data-session-id='{needle}']").count() == 0
    box = page.locator("#composer-input")
    box.press_sequentially("@Needle")
    wait_for(lambda: ("Session", "Needle in the haystack") in options(page), message="the server's session suggestion")
    page.locator("#composer-completion [data-kind=session]").click()
    assert page.locator(".reference-chip .reference-title").inner_text() == "Needle in the haystack"
