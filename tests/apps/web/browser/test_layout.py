"""The app shell's layout (issue 24 items 4 and 5): the shell never scrolls, and every desktop action is
reachable by tap on a phone and by click at 200 % zoom."""

from __future__ import annotations

from typing import Any

from tests.apps.web.browser.test_chat import send
from tests.apps.web.browser.test_tools import expand, tool_script

SHELL_SCROLL = "[document.documentElement.scrollHeight, document.documentElement.scrollWidth, innerHeight, innerWidth]"


def shell_extent(page: Any) -> tuple[int, int]:
    """How far the document extends past the viewport (height, width); the shell itself must never scroll."""
    height, width, inner_height, inner_width = page.evaluate(SHELL_SCROLL)
    return height - inner_height, width - inner_width


def test_the_shell_never_scrolls_with_a_diff_card(web, browse):
    server = web(tool_script())
    page = browse(server).page
    send(page, "\n".join(f"Line {n} of a prompt taller than the window" for n in range(60)))
    page.wait_for_selector(".turn-end")
    page.locator(".work-toggle").click()
    diff = expand(page, "edit").locator("table.diff")
    diff.wait_for()
    assert diff.locator("caption").count() == 1
    assert shell_extent(page) == (0, 0)
    page.mouse.wheel(0, 2000)
    assert page.evaluate("document.scrollingElement.scrollTop") == 0
