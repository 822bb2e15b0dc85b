"""T17 degradation and T18 reconnect (spec 12 §8.2)."""

from __future__ import annotations

import time
from typing import Any

from tests.apps.web.browser.harness import screenshot, wait_for
from tests.apps.web.browser.test_chat import WORDS, send, six_chunks

PANELS = [
    {
        "id": "web-app",
        "name": "web-app",
        "config": {
            "panels": [
                {
                    "id": "broken",
                    "url": "/static/v0.1.0/broken.js",
                    "server": "tests.apps.web.browser.no_such_module:routes",
                },
                {
                    "id": "throws",
                    "url": "/api/panels/throws/panel.js",
                    "server": "tests.apps.web.browser.panels:routes",
                },
            ]
        },
    }
]


def test_t17_failing_panels_degrade_alone_and_chat_still_streams(web, browse):
    server = web([six_chunks()], pace_ms=50, ops=PANELS)
    page = browse(server).page
    with server.client() as c:
        panels = {p["id"]: p for p in c.get("/api/ui/panels").json()["panels"]}
    assert panels["broken"]["status"] == "unavailable"
    assert "team" not in panels
    notes = page.locator(".panel-unavailable")
    wait_for(lambda: notes.count() == 2, message="two unavailable notes")
    texts = notes.all_inner_texts()
    assert texts[0].startswith("Broken unavailable — ")
    assert texts[1] == "Throws unavailable — the panel exploded while loading."
    for text in texts:
        assert "/" not in text.split(" — ", 1)[1] and "\n" not in text
    assert page.locator(".panel-slot[data-panel=team]").count() == 0
    send(page, "Still chatting")
    page.locator(".turn-end").wait_for()
    assert page.locator("#conversation").inner_text().count("".join(WORDS)) == 1
    screenshot(page, "degraded")


def steps(n: int) -> list[dict[str, Any]]:
    calls = [
        {"tool_calls": [{"name": "bash", "arguments": {"description": f"step {i}", "command": f"echo step {i}"}}]}
        for i in range(1, n + 1)
    ]
    return [*calls, {"text": "Ten steps done."}]


def chat_cards(page: Any) -> list[str]:
    """The chat as a list of card identities: tool cards by call id and status, answers by text."""
    return page.evaluate(
        """() => [...document.querySelectorAll('#conversation .tool-card, #conversation .answer, #conversation .user-msg')]
            .map((el) => el.classList.contains('tool-card') ? `tool:${el.dataset.callId}:${el.dataset.status}` : `text:${el.textContent}`)"""
    )


def test_t18_reconnect_resumes_without_gap_or_duplicate(web, browse):
    server = web(steps(10), pace_ms=120)
    b = browse(server)
    page = b.page
    send(page, "Run ten steps")
    wait_for(lambda: page.locator(".tool-card").count() >= 2, message="first tool cards")
    conn = page.locator("#conn")
    with b.network_outage():
        conn.wait_for()
        assert conn.inner_text() == "Reconnecting…"
        time.sleep(3)
    conn.wait_for(state="hidden", timeout=30000)
    b.end_outage()
    page.locator(".turn-end").wait_for(timeout=60000)
    sid = server.session_ids()[0]
    wait_for(lambda: server.events(sid, "turn/end"), message="turn end in the log")
    assert page.locator(".tool-card").count() == len(server.events(sid, "tool/call")) == 10
    live = chat_cards(page)
    page.reload()
    page.locator(".turn-end").wait_for()
    assert chat_cards(page) == live
