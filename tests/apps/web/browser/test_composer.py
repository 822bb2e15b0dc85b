"""T9 queue, T10 selectors, T14 usage, T15 log download and T16 settings (spec 12 §8.2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.apps.web.browser.harness import screenshot, wait_for
from tests.apps.web.browser.test_chat import send
from tests.logs import log_text, stored_log


def slow_text(text: str, pieces: int = 10) -> dict[str, Any]:
    """A text answer streamed in `pieces` deltas (with paceMs 200, about two seconds)."""
    size = max(1, len(text) // pieces)
    parts = [text[i : i + size] for i in range(0, len(text), size)]
    return {
        "chunks": [
            {"type": "block-start", "index": 0, "blockType": "text"},
            *({"type": "text-delta", "index": 0, "text": p} for p in parts),
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
            {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}},
            {"type": "finish", "reason": {"kind": "stop"}},
        ]
    }


def user_texts(server: Any, sid: str) -> list[str]:
    return [
        "".join(b.get("text", "") for b in e["data"]["content"])
        for e in server.events(sid, "user/message")
        if e["data"]["source"]["kind"] == "user"
    ]


def test_t9_queue_runs_next_and_removed_prompts_never_run(web, browse):
    server = web([slow_text("Answer to A, streamed slowly."), slow_text("Answer to B, streamed slowly.")], pace_ms=200)
    page = browse(server).page
    send(page, "Prompt A")
    page.locator(".answer.streaming").wait_for()
    send(page, "Prompt B")
    chip = page.locator(".queue-chip")
    chip.wait_for()
    assert chip.locator(".chip-tag").inner_text() == "Queued"
    assert "Prompt B" in chip.inner_text()
    sid = server.session_ids()[0]
    wait_for(lambda: len(server.events(sid, "turn/start")) == 2, message="B starts as turn 2")
    assert user_texts(server, sid) == ["Prompt A", "Prompt B"]
    send(page, "Prompt C")
    chip.filter(has_text="Prompt C").wait_for()
    chip.filter(has_text="Prompt C").get_by_role("button").click()
    chip.filter(has_text="Prompt C").wait_for(state="detached")
    wait_for(lambda: len(server.events(sid, "turn/end")) == 2, message="B ends")
    page.locator(".turn-end").nth(1).wait_for()
    assert user_texts(server, sid) == ["Prompt A", "Prompt B"]


def test_t10_permission_model_and_effort_selectors_append_events(web, browse):
    server = web([{"text": "first"}, {"text": "second"}], env={"DEEPSEEK_API_KEY": "sk-test-env"})
    page = browse(server).page
    send(page, "Hello")
    page.locator(".turn-end").wait_for()
    sid = server.session_ids()[0]
    page.select_option("#permission-select", "read-only")
    wait_for(
        lambda: any(e["data"] == {"preset": "read-only"} for e in server.events(sid, "permission/preset")),
        message="permission/preset",
    )
    page.select_option("#model-select", label="deepseek-v4-pro")
    wait_for(lambda: server.events(sid, "model/selection"), message="model/selection")
    page.select_option("#effort-select", "max")
    wait_for(
        lambda: any(e["data"].get("reasoningEffort") == "max" for e in server.events(sid, "model/selection")),
        message="effort in model/selection",
    )
    send(page, "Again")
    wait_for(lambda: len(server.events(sid, "turn/end")) == 2, message="second turn")
    header = server.events(sid, "request/header")[-1]["data"]["header"]["config"]
    assert header["model"] == "deepseek-v4-pro"


USAGE = {"inputTokens": 100, "cacheReadTokens": 50, "outputTokens": 10, "totalTokens": 160}


def test_t14_usage_footer_matches_the_projections(web, browse):
    server = web(
        [
            {"tool_calls": [{"name": "read", "arguments": {"file_path": "hello.txt"}}], "usage": USAGE},
            {"text": "Two calls.", "usage": USAGE},
        ]
    )
    page = browse(server).page
    send(page, "Count my tokens")
    page.locator(".turn-end").wait_for()
    footer = page.locator("#usage")
    wait_for(lambda: "320 tok" in footer.inner_text(), message="token total")
    text = footer.inner_text()
    assert "1 turns 2 steps" in text
    assert "Cache hit 33%" in text
    sid = server.session_ids()[0]
    with server.client() as c:
        pressure = c.get(f"/api/sessions/{sid}").json()["projections"]["contextPressure"]
    tokens = pressure.get("pressureTokens", pressure.get("projectedTokens"))
    assert f"context {round(tokens / pressure['contextWindow'] * 100)}%" in text


def test_t15_log_download_is_the_stored_log(web, browse):
    server = web([{"text": "Logged."}])
    page = browse(server).page
    send(page, "Keep a log")
    page.locator(".turn-end").wait_for()
    sid = server.session_ids()[0]
    page.locator("#session-menu-button").click()
    with page.expect_download() as info:
        page.get_by_role("menuitem", name="Download session log").click()
    download = info.value
    assert download.suggested_filename == f"{sid}.session.v4.jsonl"
    text = Path(download.path()).read_text(encoding="utf-8")
    assert text == log_text(stored_log(server.home / "sessions", sid))
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["version"] == 4


def test_t16_settings_theme_default_permission_and_write_only_key(web, browse):
    server = web([{"text": "one"}])
    b = browse(server)
    page = b.page
    bodies: list[str] = []

    def record(response: Any) -> None:
        try:
            bodies.append(response.text())
        except Exception:
            bodies.append("")

    page.on("response", record)
    page.keyboard.press("Control+,")
    dialog = page.locator("dialog.settings-dialog")
    dialog.wait_for()
    dialog.get_by_role("tab", name="Appearance").click()
    dialog.get_by_label("Dark").check()
    wait_for(lambda: page.evaluate("document.documentElement.dataset.theme") == "dark", message="dark theme")
    dialog.get_by_role("tab", name="General").click()
    dialog.get_by_label("Default permission for new sessions").select_option("read-only")
    dialog.get_by_role("tab", name="Models").click()
    dialog.locator(".provider[data-provider-id=deepseek-official]").get_by_role("button", name="Edit").click()
    dialog.get_by_label("API key (write-only)").fill("sk-test-SECRET")
    dialog.get_by_role("button", name="Save").click()
    dialog.locator(".provider[data-provider-id=deepseek-official] .dot.ok").wait_for()
    dialog.get_by_role("tab", name="Models").focus()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowDown")
    screenshot(page, "settings-dark")
    page.keyboard.press("Escape")
    page.reload()
    page.wait_for_selector("#new-session")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    channels = [int(x) for x in background[background.index("(") + 1 : -1].split(",")[:3]]
    assert sum(channels) / 3 < 60, background
    page.locator("#new-session").click()
    send(page, "Start read-only")
    page.locator(".turn-end").wait_for()
    sid = server.session_ids()[0]
    events = server.events(sid)
    first_turn = next(i for i, e in enumerate(events) if e["type"] == "turn/start")
    presets = [e["data"]["preset"] for e in events[:first_turn] if e["type"] == "permission/preset"]
    assert presets[-1] == "read-only"
    with server.client() as c:
        models = c.get("/api/models").json()
    ds = next(p for p in models["providers"] if p["id"] == "deepseek-official")
    assert ds["configured"] is True
    assert not any("sk-test-SECRET" in body for body in bodies)
