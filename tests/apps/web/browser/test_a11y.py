"""T19 accessibility: axe in both themes and a keyboard-only tour with visible focus (spec 12 §6, §8.2)."""

from __future__ import annotations

from typing import Any

from axe_playwright_python.sync_playwright import Axe

from tests.apps.web.browser.harness import unfold, wait_for
from tests.apps.web.browser.test_cards import ESCALATE
from tests.apps.web.browser.test_chat import send
from tests.apps.web.browser.test_tools import tool_script

AXE = Axe()


def serious(page: Any, where: str) -> list[str]:
    """Serious or critical axe violations on the page as it is now."""
    violations = AXE.run(page).response["violations"]
    return [
        f"{where}: {v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]


def scan_session(page: Any, theme: str) -> list[str]:
    found = serious(page, f"chat with tools ({theme})")
    page.locator("#tab-trajectory").click()
    page.locator(".traj-row[data-kind=TOOL]").first.click()
    page.locator("#inspector .tabs").wait_for()
    found += serious(page, f"trajectory and inspector ({theme})")
    page.locator("#tab-chat").click()
    page.keyboard.press("Control+,")
    page.locator("dialog.settings-dialog").wait_for()
    found += serious(page, f"settings ({theme})")
    page.keyboard.press("Escape")
    return found


def test_t19_axe_finds_no_serious_violation_in_either_theme(web, browse):
    server = web([*tool_script(), ESCALATE, {"text": "ran it"}])
    page = browse(server).page
    found = serious(page, "home (light)")
    send(page, "Use every file tool")
    page.locator(".turn-end").wait_for()
    unfold(page)
    page.locator(".tool-card[data-tool=bash] .tool-head").click()
    page.locator(".tool-card[data-tool=edit] .tool-head").click()
    found += scan_session(page, "light")
    send(page, "Now something that needs approval")
    page.locator(".approval-card").wait_for()
    found += serious(page, "approval (light)")
    dark = browse(server, color_scheme="dark").page
    assert dark.evaluate("document.documentElement.dataset.theme") == "dark"
    found += serious(dark, "home (dark)")
    dark.locator(".session-row").first.click()
    dark.locator(".approval-card").wait_for()
    found += serious(dark, "approval (dark)")
    dark.locator(".approval-card").get_by_role("button", name="Allow once").click()
    dark.locator(".turn-end").nth(1).wait_for()
    unfold(dark)
    dark.locator(".tool-card[data-tool=edit] .tool-head").click()
    found += scan_session(dark, "dark")
    assert not found, "\n".join(found)


def press(page: Any, key: str, seen: list[str]) -> None:
    """Press a key; the element that then has focus must show a focus outline."""
    page.keyboard.press(key)
    info = page.evaluate(
        """() => { const el = document.activeElement; const s = getComputedStyle(el);
            return {tag: el.tagName, id: el.id, text: (el.textContent || '').trim().slice(0, 30), outline: s.outlineStyle, width: s.outlineWidth}; }"""
    )
    if info["tag"] != "BODY":
        assert info["outline"] != "none", f"no focus outline on {info}"
        seen.append(f"{info['tag']}#{info['id']}:{info['text']}")


def tab_until(page: Any, predicate: str, seen: list[str], limit: int = 80) -> None:
    for _ in range(limit):
        press(page, "Tab", seen)
        if page.evaluate(predicate):
            return
    raise AssertionError(f"never reached {predicate} with Tab")


def test_t19_keyboard_only_tour_with_visible_focus(web, browse):
    server = web([*tool_script(), ESCALATE, {"text": "ran it"}])
    page = browse(server).page
    seen: list[str] = []
    tab_until(page, "document.activeElement.id === 'new-session'", seen)
    press(page, "Enter", seen)
    assert page.evaluate("document.activeElement.id") == "composer-input"
    page.keyboard.type("Use every file tool")
    press(page, "Enter", seen)
    page.locator(".turn-end").wait_for()
    page.locator("#sidebar-toggle").focus()
    tab_until(page, "document.activeElement.classList.contains('work-toggle')", seen)
    press(page, "Enter", seen)
    assert page.locator(".work-toggle").get_attribute("aria-expanded") == "true"
    press(page, "Alt+2", seen)
    assert page.locator("#panel-trajectory").is_visible()
    tab_until(page, "document.activeElement.classList.contains('traj-rows')", seen)
    press(page, "ArrowDown", seen)
    press(page, "Enter", seen)
    page.locator("#inspector .tabs").wait_for()
    press(page, "Escape", seen)
    assert page.locator("#inspector").is_hidden()
    press(page, "Alt+1", seen)
    page.locator("#composer-input").focus()
    page.keyboard.type("Now something that needs approval")
    press(page, "Enter", seen)
    page.locator(".approval-card").wait_for()
    tab_until(page, "document.activeElement.textContent.trim() === 'Allow once'", seen)
    press(page, "Enter", seen)
    page.locator(".approval-card").wait_for(state="detached")
    tab_until(page, "document.activeElement.id === 'open-settings'", seen)
    press(page, "Enter", seen)
    page.locator("dialog.settings-dialog[open]").wait_for()
    press(page, "Escape", seen)
    wait_for(lambda: page.evaluate("document.activeElement.id") == "open-settings", message="focus back on the opener")
    assert len(seen) > 10
