"""The app shell's layout (issue 24 items 4 and 5): the shell never scrolls, and every desktop action is
reachable by tap on a phone and by click at 200 % zoom."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Error as PlaywrightError

from tests.apps.web.browser.harness import screenshot, unfold, wait_for
from tests.apps.web.browser.test_a11y import serious
from tests.apps.web.browser.test_chat import send
from tests.apps.web.browser.test_tools import expand, tool_script

SHELL_SCROLL = "[document.documentElement.scrollHeight, document.documentElement.scrollWidth, innerHeight, innerWidth]"


def shell_extent(page: Any) -> tuple[int, int]:
    """How far the document extends past the viewport (height, width); the shell itself must never scroll.
    A phone widens its layout viewport to fit content that overflows, so the width is measured against the
    viewport the context was given."""
    height, width, inner_height, inner_width = page.evaluate(SHELL_SCROLL)
    given = page.viewport_size
    return height - inner_height, max(width, inner_width) - given["width"]


def test_the_shell_never_scrolls_with_a_diff_card(web, browse):
    server = web(tool_script())
    page = browse(server).page
    send(page, "\n".join(f"Line {n} of a prompt taller than the window" for n in range(60)))
    page.wait_for_selector(".turn-end")
    unfold(page)
    diff = expand(page, "edit").locator("table.diff")
    diff.wait_for()
    assert diff.locator("caption").count() == 1
    assert shell_extent(page) == (0, 0)
    page.mouse.wheel(0, 2000)
    assert page.evaluate("document.scrollingElement.scrollTop") == 0


PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True}
ZOOM_200 = {"viewport": {"width": 640, "height": 400}, "device_scale_factor": 2}
"""1280×800 at 200 % zoom: a 640×400 CSS viewport drawn with two device pixels per CSS pixel."""


def on_screen(page: Any, selector: str) -> None:
    """The (first) element is inside the viewport (to a pixel of rounding) and is what a tap at its centre hits
    (nothing covers it). The box is read until one is given: a list the page redraws (the sidebar's, when an
    index frame arrives) replaces its rows, and a row replaced while its box is read has none."""
    box = wait_for(page.locator(selector).first.bounding_box, timeout=5, message=f"{selector} rendered")
    width, height = page.evaluate("[innerWidth, innerHeight]")
    assert box["x"] >= -1 and box["y"] >= -1, (selector, box)
    assert box["x"] + box["width"] <= width + 1 and box["y"] + box["height"] <= height + 1, (
        selector,
        box,
        width,
        height,
    )
    hit = page.evaluate(
        "([sel, x, y]) => document.querySelector(sel).contains(document.elementFromPoint(x, y))",
        [selector, box["x"] + box["width"] / 2, box["y"] + box["height"] / 2],
    )
    assert hit, f"{selector} is covered at its centre"


def shown(page: Any, selector: str) -> bool:
    """Scroll the element into view; ``False`` when the page replaced it meanwhile (Playwright does not retry
    scrolling a detached element as it retries a tap), so the caller tries again with the new one."""
    try:
        page.locator(selector).first.scroll_into_view_if_needed()
    except PlaywrightError as exc:
        if "not attached" not in str(exc):
            raise
        return False
    return True


def press(page: Any, selector: str, touch: bool) -> None:
    """Tap (phone) or click (zoomed desktop) an element that must be on screen once its scroller shows it."""
    wait_for(lambda: shown(page, selector), timeout=10, message=f"{selector} scrolled into view")
    on_screen(page, selector)
    if touch:
        page.locator(selector).first.tap()
    else:
        page.locator(selector).first.click()


def drawer_opens_and_closes(page: Any, touch: bool) -> None:
    """The menu button opens the drawer with focus inside; Escape and a tap outside close it, focus returns."""
    assert not page.locator("#sidebar").is_visible()
    press(page, "#drawer-button", touch)
    assert page.locator("#drawer-button").get_attribute("aria-expanded") == "true"
    assert page.evaluate("document.activeElement.id") == "new-session"
    for selector in ("#new-session", "#session-filter", "#open-settings"):
        on_screen(page, selector)
    page.keyboard.press("Escape")
    assert not page.locator("#sidebar").is_visible()
    assert page.evaluate("document.activeElement.id") == "drawer-button"
    press(page, "#drawer-button", touch)
    width = page.evaluate("innerWidth")
    drawer = page.locator("#sidebar").bounding_box()
    outside = (drawer["width"] + width) / 2, 300
    if touch:
        page.touchscreen.tap(*outside)
    else:
        page.mouse.click(*outside)
    assert not page.locator("#sidebar").is_visible()
    assert page.evaluate("document.activeElement.id") == "drawer-button"


def every_action_by_tap(page: Any, touch: bool, name: str) -> None:
    """Sessions, New session, Settings, Send, Stop and the inspector, each reached by tap or click
    (`name` prefixes the inspector's screenshot)."""
    drawer_opens_and_closes(page, touch)
    page.locator("#composer-input").fill("Use every file tool")
    press(page, ".send-btn", touch)
    page.locator(".stop-main").wait_for()
    on_screen(page, ".stop-main")
    page.locator(".turn-end").wait_for()
    assert shell_extent(page) == (0, 0)
    press(page, "#drawer-button", touch)
    press(page, ".session-row", touch)
    assert not page.locator("#sidebar").is_visible()
    press(page, "#drawer-button", touch)
    press(page, "#new-session", touch)
    assert page.locator(".empty-state").is_visible()
    press(page, "#drawer-button", touch)
    press(page, ".session-row", touch)
    page.locator(".turn-end").wait_for()
    press(page, "#drawer-button", touch)
    press(page, "#open-settings", touch)
    dialog = page.locator("dialog[open]")
    dialog.wait_for()
    on_screen(page, "dialog[open] .dialog-head button")
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.id") == "drawer-button"
    press(page, "#tab-trajectory", touch)
    page.locator(".traj-row").first.wait_for()
    press(page, ".traj-row[data-kind=TOOL]", touch)
    page.locator("#inspector").wait_for()
    for selector in ("#inspector .inspector-head", "#insp-tab-Payload", "#inspector [aria-label='Close inspector']"):
        on_screen(page, selector)
    press(page, "#insp-tab-Payload", touch)
    assert '"file_path"' in page.locator("#inspector").inner_text()
    screenshot(page, f"{name}-inspector")
    press(page, "#insp-tab-Raw", touch)
    assert page.locator("#insp-tab-Raw").get_attribute("aria-selected") == "true"
    press(page, "#inspector [aria-label='Close inspector']", touch)
    on_screen(page, ".traj-toolbar input")
    assert shell_extent(page) == (0, 0)


def test_every_action_is_reachable_by_tap_on_a_phone(web, browse):
    server = web(tool_script(), pace_ms=60)
    page = browse(server, **PHONE).page
    every_action_by_tap(page, touch=True, name="phone")
    press(page, "#tab-chat", True)
    unfold(page)
    expand(page, "edit")
    assert shell_extent(page) == (0, 0)
    found = serious(page, "phone chat")
    screenshot(page, "phone")
    press(page, "#drawer-button", True)
    found += serious(page, "phone drawer")
    screenshot(page, "phone-drawer")
    assert not found, "\n".join(found)


def test_every_action_is_reachable_by_click_at_200_percent_zoom(web, browse):
    server = web(tool_script(), pace_ms=60)
    page = browse(server, **ZOOM_200).page
    every_action_by_tap(page, touch=False, name="zoom-200")
    press(page, "#tab-chat", False)
    chat = page.locator("#panel-chat").bounding_box()
    assert chat["height"] >= 400 / 2, f"the chat is {chat['height']} px of 400 px"
    screenshot(page, "zoom-200")
