"""Unpaired UTF-16 surrogates never brick a session: replaced by U+FFFD where text enters the log, and a log
written before that (or by another runtime) still resumes and completes a turn through the real adapter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import pydsh
from pydsh.kernel.text import utf8, utf16_len, without_lone_surrogates
from pydsh.session.events import snapshot
from tests.logs import PLAIN_LOGS

HALF_EMOJI = "\ud83d"


def messages_sse(text_json: str) -> bytes:
    """An Anthropic Messages stream answering ``text_json`` (a JSON string literal, escapes kept)."""
    events = [
        '{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":0}}}',
        '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":' + text_json + "}}",
        '{"type":"content_block_stop","index":0}',
        '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}',
        '{"type":"message_stop"}',
    ]
    return "".join(f"event: {json.loads(e)['type']}\ndata: {e}\n\n" for e in events).encode()


class Model:
    """A loopback DeepSeek endpoint (an httpx transport): records request bodies, answers from a list."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.bodies: list[bytes] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.read())
        return httpx.Response(
            200, content=messages_sse(self.answers.pop(0)), headers={"content-type": "text/event-stream"}
        )


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    directory = tmp_path / "work"
    directory.mkdir()
    return directory


def test_the_boundary_replaces_only_unpaired_surrogates() -> None:
    assert without_lone_surrogates("plain") == "plain"
    assert without_lone_surrogates("é" + HALF_EMOJI) == "é\ufffd"
    assert without_lone_surrogates("\ud83d\ude00") == "😀"
    assert snapshot({"text": "a" + HALF_EMOJI, "k\udfff": ["\udc00b"]}) == {"text": "a\ufffd", "k\ufffd": ["\ufffdb"]}
    assert utf8("x" + HALF_EMOJI) == "x\ufffd".encode()


async def test_a_prompt_with_half_an_emoji_is_logged_readable_and_sent(workspace: Path) -> None:
    model = Model(['"fine"'])
    async with pydsh.open_host(cwd=workspace, transport=httpx.MockTransport(model)) as host:
        agent = await host.create_agent()
        result = await agent.run("smile " + HALF_EMOJI)
    assert (result.finish_reason, result.final_response) == ("completed", "fine")
    prompts = [e for e in result.events if e["type"] == "user/message"]
    assert prompts[0]["data"]["content"][0]["text"] == "smile \ufffd"
    assert "smile \ufffd" in model.bodies[0].decode("utf-8")


async def test_model_output_with_an_escaped_half_emoji_does_not_break_the_next_request(workspace: Path) -> None:
    model = Model(['"half \\ud83d"', '"next"'])
    async with pydsh.open_host(cwd=workspace, transport=httpx.MockTransport(model)) as host:
        agent = await host.create_agent()
        first = await agent.run("one")
        second = await agent.run("two")
    assert first.final_response == "half \ufffd"
    assert (second.finish_reason, second.final_response) == ("completed", "next")


async def test_a_stored_session_holding_a_lone_surrogate_resumes_and_completes_a_turn(
    workspace: Path, tmp_path: Path
) -> None:
    """A log that already holds one (written before the boundary, or by a JavaScript runtime) stays usable."""
    home = tmp_path / "home"
    model = Model(['"first"', '"second"'])
    transport = httpx.MockTransport(model)
    plain = pydsh.open_host(cwd=workspace, dsh_home=home, transport=transport, patches=[PLAIN_LOGS])
    async with plain as host:
        agent = await host.create_agent(session_id="s1")
        await agent.run("marker-text")
    [log] = home.rglob("session.v4.jsonl")
    log.write_text(log.read_text().replace("marker-text", "marker-text\\ud83d"))
    async with pydsh.open_host(cwd=workspace, dsh_home=home, transport=transport) as host:
        agent = await host.resume_agent("s1")
        stored: Any = next(e for e in agent.events if e["type"] == "user/message")
        assert stored["data"]["content"][0]["text"] == "marker-text" + HALF_EMOJI
        result = await agent.run("again")
    assert (result.finish_reason, result.final_response) == ("completed", "second")
    assert "marker-text\ufffd" in model.bodies[-1].decode("utf-8")


@pytest.mark.parametrize(
    "text", ["plain", "é→—", "a😀b😀", HALF_EMOJI + "x", "\ud83d\ude00", "\ude00\ud83d", "中文" * 1000 + "𝄞"]
)
def test_utf16_length_counts_what_javascript_counts(text: str) -> None:
    """Astral characters count two code units, every other code point (a lone surrogate too) one."""
    assert utf16_len(text) == sum(2 if ord(ch) > 0xFFFF else 1 for ch in text)
