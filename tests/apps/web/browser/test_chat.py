"""T3 boot and T4 streaming (spec 12 §8.2)."""

from __future__ import annotations

from typing import Any

from tests.apps.web.browser.harness import screenshot, wait_for

WORDS = ["The ", "answer ", "streams ", "in ", "six ", "chunks."]


def six_chunks() -> dict[str, Any]:
    deltas = [{"type": "text-delta", "index": 0, "text": w} for w in WORDS]
    return {
        "chunks": [
            {"type": "block-start", "index": 0, "blockType": "text"},
            *deltas,
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(WORDS)}},
            {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": 6, "totalTokens": 16}},
            {"type": "finish", "reason": {"kind": "stop"}},
        ]
    }


def send(page: Any, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def test_t3_boot_redirects_hides_token_and_reaches_new_session(web, browse, chromium):
    server = web([])
    b = browse(server)
    page = b.page
    assert page.url == f"{server.origin}/"
    assert "token" not in page.url
    other = chromium.new_context()
    spent = other.new_page().goto(server.url)
    assert spent.status == 401 and "already used" in spent.text()
    other.close()
    assert "pydsh-auth" not in page.evaluate("document.cookie")
    page.wait_for_selector(".ws-name")
    assert page.locator(".ws-name").first.inner_text() == "work"
    page.locator("body").focus()
    page.evaluate("document.activeElement.blur()")
    for _ in range(3):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "new-session":
            break
    assert page.evaluate("document.activeElement.id") == "new-session"
    screenshot(page, "home")


def test_t4_streaming_grows_then_commits_once(web, browse):
    server = web([six_chunks()], pace_ms=150)
    page = browse(server).page
    send(page, "Stream me an answer")
    lengths: list[int] = []

    def grown_twice() -> bool:
        text = page.evaluate("document.querySelector('.answer.streaming')?.textContent || ''")
        if text and (not lengths or len(text) > lengths[-1]):
            lengths.append(len(text))
        return len(lengths) >= 2 and lengths[-1] < len("".join(WORDS))

    wait_for(grown_twice, message="streamed text growing twice before the turn ends")
    page.wait_for_selector(".turn-end")
    final = "".join(WORDS)
    assert page.locator("#conversation").inner_text().count(final) == 1
    assert page.locator(".answer.streaming").count() == 0
    row = page.locator(".session-row").first
    wait_for(
        lambda: "Stream me an answer" in row.inner_text() or "Stream" in row.inner_text(),
        message="title in the sidebar",
    )
    assert "now" in row.inner_text()
    wait_for(lambda: page.locator(".session-row .running").count() == 0, message="running indicator gone")
    wait_for(lambda: "1 turns 1 steps" in page.locator("#usage").inner_text(), message="usage footer")
    screenshot(page, "chat")


def test_model_text_never_becomes_markup_or_unsafe_links(web, browse):
    text = "**Bold** <img src=x onerror=alert(1)> [bad](javascript:alert(1)) [good](https://example.org/) `<b>code</b>`"
    server = web([{"text": text}])
    page = browse(server).page
    send(page, "<script>alert(1)</script> as plain text")
    page.locator(".turn-end").wait_for()
    answer = page.locator(".answer")
    assert answer.locator("strong").inner_text() == "Bold"
    assert answer.locator("img").count() == 0
    assert "<img src=x onerror=alert(1)>" in answer.inner_text()
    assert answer.locator("a").count() == 1
    link = answer.locator("a")
    assert link.get_attribute("href") == "https://example.org/"
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert answer.locator("code").inner_text() == "<b>code</b>"
    assert page.locator(".bubble").inner_text() == "<script>alert(1)</script> as plain text"
    assert page.locator("#conversation script").count() == 0
