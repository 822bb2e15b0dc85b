"""T5 tool cards and T6 trajectory (spec 12 §8.2)."""

from __future__ import annotations

from typing import Any

from tests.apps.web.browser.harness import screenshot, unfold, wait_for
from tests.apps.web.browser.test_chat import send


def tool_script() -> list[dict[str, Any]]:
    """Thinking on: read, bash, write, edit, then a final answer."""
    return [
        {
            "reasoning": "Read the file first.",
            "tool_calls": [{"name": "read", "arguments": {"file_path": "hello.txt"}}],
        },
        {
            "reasoning": "Now run a command.",
            "tool_calls": [{"name": "bash", "arguments": {"description": "print hi", "command": "echo hi"}}],
        },
        {
            "reasoning": "Create a file.",
            "tool_calls": [{"name": "write", "arguments": {"file_path": "new.txt", "content": "brand new\n"}}],
        },
        {
            "reasoning": "Edit the greeting.",
            "tool_calls": [
                {"name": "edit", "arguments": {"file_path": "hello.txt", "old_string": "world", "new_string": "there"}}
            ],
        },
        {"text": "Read, ran, wrote and edited."},
    ]


def run_tools(page: Any) -> None:
    send(page, "Use every file tool")
    page.wait_for_selector(".turn-end")


def card(page: Any, tool: str) -> Any:
    return page.locator(f".tool-card[data-tool={tool}]")


def expand(page: Any, tool: str) -> Any:
    c = card(page, tool)
    c.locator(".tool-head").click()
    return c.locator(".tool-body")


def test_t5_tool_cards_collapse_and_expand(web, browse):
    server = web(tool_script())
    page = browse(server).page
    run_tools(page)
    toggle = page.locator(".work-toggle")
    assert toggle.get_attribute("aria-expanded") == "false"
    assert toggle.inner_text().startswith("Completed in")
    assert "Read 1 file, ran 1 command, edited 2 files" in toggle.inner_text()
    toggle.click()
    # the work list is drawn on the frame after the click: under load the first read can come before it
    think = page.locator(".think summary").first
    wait_for(lambda: think.inner_text().startswith("Think"), message="the thinking row drawn")
    read = expand(page, "read")
    assert [r.inner_text().split("\t") for r in read.locator("tr").all()] == [
        ["1", "hello world"],
        ["2", "second line"],
    ]
    bash = expand(page, "bash")
    assert bash.locator(".bash-cmd").inner_text() == "echo hi"
    assert bash.locator(".tool-output").inner_text().strip() == "hi"
    assert "Created" in card(page, "write").locator(".tool-summary").inner_text()
    write = expand(page, "write")
    assert "brand new" in write.inner_text()
    edit = expand(page, "edit")
    rows = [
        " ".join(t.inner_text() for t in r.locator("td.sign, td.txt").all())
        for r in edit.locator("tr.diff-del, tr.diff-add").all()
    ]
    assert rows == ["− hello world", "+ hello there"]
    screenshot(page, "tools")


def test_t6_trajectory_rows_inspector_and_inspect(web, browse):
    server = web(tool_script())
    page = browse(server).page
    run_tools(page)
    page.locator("#tab-trajectory").click()
    kinds = page.locator(".traj-row .kind-badge").all_inner_texts()
    assert kinds[:3] == ["SYSTEM", "USER", "CONTEXT"]
    assert kinds.count("TOOL") == 4
    bash_row = page.locator(".traj-row[data-kind=TOOL]").nth(1)
    assert bash_row.locator(".row-text").inner_text().startswith("bash ")
    bash_row.click()
    page.keyboard.press("ArrowDown")
    selected = page.locator(".traj-row.selected")
    assert selected.get_attribute("data-seq") != bash_row.get_attribute("data-seq")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    inspector = page.locator("#inspector")
    inspector.get_by_role("tab", name="Payload").click()
    assert '"command": "echo hi"' in inspector.inner_text()
    inspector.get_by_role("tab", name="Result").click()
    assert "hi" in inspector.locator(".insp-pre").first.inner_text()
    inspector.get_by_role("tab", name="Schema").click()
    assert '"command"' in inspector.inner_text()
    inspector.get_by_role("tab", name="Timing").click()
    assert " ms" in inspector.inner_text()
    inspector.get_by_role("tab", name="Payload").click()
    screenshot(page, "trajectory")
    seq = page.locator(".traj-row.selected").get_attribute("data-seq")
    page.locator("#tab-chat").click()
    unfold(page)
    expand(page, "bash").get_by_role("button", name="Inspect").click()
    wait_for(lambda: page.locator("#panel-trajectory").is_visible(), message="trajectory shown")
    assert page.locator(".traj-row.selected").get_attribute("data-seq") == seq
