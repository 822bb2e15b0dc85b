"""Following the conversation (issue 24 item 5): sending while scrolled up brings your own message into view,
and content that arrives while you read further up offers a "New messages below" button that jumps to the end."""

from __future__ import annotations

from typing import Any

from tests.apps.web.browser.harness import wait_for

LONG = "\n\n".join(f"Paragraph {n} of a long answer that fills the chat." for n in range(80))


def send(page: Any, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def scroll_up(page: Any) -> None:
    """Scroll the chat to its top once its content has laid out taller than the view (rendering is sliced
    over frames, so the answer may still be growing when its turn's end marker appears)."""
    wait_for(
        lambda: page.evaluate("(v => v.scrollHeight > v.clientHeight * 2)(document.getElementById('panel-chat'))"),
        message="the chat taller than its view",
    )
    page.evaluate("document.getElementById('panel-chat').scrollTop = 0")
    page.locator("#panel-chat").dispatch_event("scroll")


def in_view(page: Any, selector: str) -> bool:
    """Whether the last element matching `selector` lies within the chat view's visible box."""
    return page.evaluate(
        """(selector) => {
          const view = document.getElementById('panel-chat').getBoundingClientRect();
          const items = document.querySelectorAll(selector);
          const box = items[items.length - 1]?.getBoundingClientRect();
          return Boolean(box) && box.top >= view.top && box.bottom <= view.bottom;
        }""",
        selector,
    )


def test_sending_while_scrolled_up_shows_your_own_message(web, browse):
    server = web([{"text": LONG}, {"text": "Second answer."}])
    page = browse(server).page
    send(page, "Write a long answer")
    page.wait_for_selector(".turn-end")
    scroll_up(page)
    wait_for(lambda: not in_view(page, ".turn-end"), message="the end of the answer scrolled out of view")
    send(page, "And now a short one")
    wait_for(lambda: page.locator(".user-msg").count() == 2, message="the second message")
    wait_for(lambda: in_view(page, ".user-msg"), message="the message just sent in view")


def test_new_messages_below_appears_while_reading_and_jumps_to_the_end(web, browse):
    server = web([{"text": LONG}, {"text": "Late news."}], pace_ms=400)
    page = browse(server).page
    button = page.locator(".new-below")
    send(page, "Write a long answer")
    page.wait_for_selector(".turn-end")
    assert button.is_hidden()
    send(page, "Then some late news")
    page.wait_for_selector(".turn:nth-child(2)")
    scroll_up(page)
    wait_for(button.is_visible, message='"New messages below" while scrolled up')
    assert page.get_by_role("button", name="New messages below").count() == 1
    page.wait_for_selector(".turn:nth-child(2) .turn-end")
    button.focus()
    page.keyboard.press("Enter")
    wait_for(lambda: in_view(page, ".turn-end"), message="the end of the conversation in view")
    assert button.is_hidden()
    assert page.evaluate("document.activeElement.id") == "conversation"
