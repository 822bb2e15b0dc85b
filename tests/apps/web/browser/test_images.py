"""Images in the page: one pasted and one uploaded in the composer reach the model (DeepSeek's request
format, through the loopback mock) and show as thumbnails in the chat, before and after a reload."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from tests.apps.web.browser.harness import screenshot, wait_for
from tests.apps.web.browser.test_chat import send
from tests.images.images import png
from tests.sdk.conftest import ThreadedMock

PASTE = """([data]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], "image.png", { type: "image/png" }));
  const event = new ClipboardEvent("paste", { clipboardData: transfer, bubbles: true, cancelable: true });
  document.getElementById("composer-input").dispatchEvent(event);
}"""


@pytest.fixture
def model() -> Iterator[ThreadedMock]:
    """The loopback model, answering every call with one line."""
    server = ThreadedMock([{"text": "Two red rectangles."}], repeat_last=True)
    yield server
    server.close()


def images_sent(model: ThreadedMock) -> list[str]:
    """The base64 data of every image block in the user messages the model was sent."""
    found = []
    for request in model.requests:
        for message in request["body"].get("messages") or []:
            content = message["content"] if isinstance(message["content"], list) else []
            found += [b["source"]["data"] for b in content if b.get("type") == "image"]
    return found


def thumbnails_loaded(page: Any) -> int:
    """How many message thumbnails the browser decoded (each fetched from the attachment endpoint)."""
    return int(
        page.evaluate("[...document.querySelectorAll('.message-image img')].filter((i) => i.naturalWidth).length")
    )


def test_pasted_and_uploaded_images_reach_the_model_and_the_chat(web, browse, model):
    server = web(
        [],
        ops=[{"id": "llm-replay", "disabled": True}, {"id": "llm-deepseek", "disabled": False}],
        env={"DEEPSEEK_BASE_URL": model.base_url, "DEEPSEEK_API_KEY": "sk-test"},
    )
    browser = browse(server)
    page = browser.page
    page.select_option("#model-select", "deepseek-official\u0000deepseek-flash")
    page.evaluate(PASTE, [base64.b64encode(png(3, 2)).decode()])
    page.get_by_role("button", name="Attach images").wait_for()
    page.set_input_files(
        ".attach-wrap input[type=file]", files=[{"name": "b.png", "mimeType": "image/png", "buffer": png(5, 4)}]
    )
    chips = page.locator(".image-chip")
    chips.nth(1).wait_for()
    assert [chips.nth(i).locator("img").get_attribute("alt") for i in range(2)] == ["Pasted image 1", "b.png"]
    screenshot(page, "images-composer")
    send(page, "What are these?")
    page.locator(".turn-end").wait_for()
    chips.first.wait_for(state="detached")
    assert images_sent(model)[:2] == [base64.b64encode(png(3, 2)).decode(), base64.b64encode(png(5, 4)).decode()]
    page.wait_for_function("document.querySelectorAll('.message-image img').length === 2")
    page.wait_for_function(
        "[...document.querySelectorAll('.message-image img')].every((i) => i.complete && i.naturalWidth)"
    )
    assert page.locator(".user-msg .bubble").inner_text() == "What are these?"
    screenshot(page, "images-chat")
    page.reload()
    page.locator(".turn-end").wait_for()
    page.wait_for_function(
        "[...document.querySelectorAll('.message-image img')].filter((i) => i.naturalWidth).length === 2"
    )
    assert thumbnails_loaded(page) == 2


def test_a_text_only_model_keeps_the_draft_and_says_why(web, browse, model):
    server = web(
        [],
        ops=[{"id": "llm-replay", "disabled": True}, {"id": "llm-deepseek", "disabled": False}],
        env={"DEEPSEEK_BASE_URL": model.base_url, "DEEPSEEK_API_KEY": "sk-test"},
    )
    browser = browse(server)
    page = browser.page
    page.select_option("#model-select", "deepseek-official\u0000deepseek-flash")
    send(page, "Hello")
    page.locator(".turn-end").wait_for()
    page.select_option("#model-select", "deepseek-official\u0000deepseek-v4-flash")
    sid = server.session_ids()[0]
    selected = lambda: [e["data"].get("model") for e in server.events(sid, "model/selection")]  # noqa: E731
    wait_for(lambda: selected()[-1:] == ["deepseek-v4-flash"], message="the text-only model selected")
    page.set_input_files(
        ".attach-wrap input[type=file]", files=[{"name": "c.png", "mimeType": "image/png", "buffer": png(2, 2)}]
    )
    page.locator(".image-chip").wait_for()
    send(page, "And this?")
    error = page.locator(".composer-error")
    error.wait_for()
    assert error.inner_text() == 'Model "deepseek-v4-flash" does not support image input.'
    assert page.locator(".image-chip").count() == 1
    assert page.input_value("#composer-input") == "And this?"
    refused = "console: Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)"
    browser.errors.remove(refused)  # the refusal this test asked for, logged by Chromium
