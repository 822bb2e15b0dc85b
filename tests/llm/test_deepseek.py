"""The DeepSeek Messages adapter: request capture, serialisation, validation, raw streams, usage (spec 04 §4)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from pydsh.kernel import Kernel
from pydsh.kernel.compose import Row
from pydsh.llm import http
from pydsh.llm.deepseek import Config, DeepSeekAdapter, messages_url
from pydsh.llm.keys import LLM
from pydsh.llm.sse import drain
from pydsh.llm.types import LlmError
from pydsh.testing.mock_model_server import MockModelServer

MODEL = "deepseek-v4-flash"


def text(role: str, value: str, mid: str, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": value}], "source": {"kind": role}, "id": mid, **extra}


def assistant(*blocks: dict[str, Any], replay_model: str | None = None, mid: str = "a1") -> dict[str, Any]:
    source: dict[str, Any] = {"kind": "model", "provider": "deepseek-official", "model": MODEL}
    if replay_model is not None:
        entries = [
            {"type": b["type"], **({"signature": "sig-" + mid} if b["type"] == "reasoning" else {})} for b in blocks
        ]
        source["replayState"] = {
            "response": {"kind": "deepseek-messages", "version": 1, "model": replay_model},
            "blocks": entries,
        }
    return {"role": "assistant", "content": list(blocks), "source": source, "id": mid}


def tool_result(call_id: str, value: str, *, error: bool = False) -> dict[str, Any]:
    return {
        "role": "tool",
        "source": {"kind": "tool", "callId": call_id},
        "toolCallId": call_id,
        "content": [{"type": "text", "text": value}],
        "isError": error,
        "id": "t-" + call_id,
    }


def call(call_id: str, args: str = '{"file_path":"a.txt"}') -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": "read", "arguments": args}


async def collect(it: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c async for c in it]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")


def test_url_rule() -> None:
    assert messages_url("https://api.deepseek.com/anthropic") == "https://api.deepseek.com/anthropic/v1/messages"
    assert messages_url("http://127.0.0.1:18431") == "http://127.0.0.1:18431/v1/messages"
    assert messages_url("http://127.0.0.1:1/v1/") == "http://127.0.0.1:1/v1/messages"


@pytest.mark.parametrize("url", ["ftp://x", "https://u:p@x", "https://x/?q=1", "https://x/#f", "nohost"])
def test_base_url_must_be_plain_http(url: str) -> None:
    with pytest.raises(ValidationError):
        Config(baseURL=url)


async def test_model_info_defaults_and_catalog() -> None:
    adapter = DeepSeekAdapter(Config())
    info = await adapter.resolve_model("deepseek-official", MODEL)
    assert info["name"] == "DeepSeek-V4-Flash"
    assert info["context"] == {"contextWindow": 1000000} and info["defaultMaxTokens"] == 256000
    assert [e["id"] for e in info["reasoning"]["efforts"]] == ["off", "low", "high", "max"]
    assert info["reasoning"]["efforts"][0] == {
        "id": "off",
        "name": "Off",
        "description": "Use for simple tasks that do not need reasoning.",
    }
    assert info["reasoning"]["defaultEffort"] == "high"
    flash = await adapter.resolve_model("deepseek-official", "deepseek-flash")
    assert (flash["systemPromptUpdate"], flash["toolUpdate"]) == ("in-history", "addition-only")
    unlisted = await adapter.resolve_model("deepseek-official", "future-model")
    assert unlisted["name"] == "future-model" and unlisted["context"] == {"contextWindow": 1000000}
    disabled = await DeepSeekAdapter(Config(thinking="disabled")).resolve_model("deepseek-official", MODEL)
    assert disabled["reasoning"]["efforts"] == [
        {"id": "off", "name": "Off", "description": "Use for simple tasks that do not need reasoning."}
    ]
    assert disabled["reasoning"]["defaultEffort"] == "off"
    custom = DeepSeekAdapter(Config(models=[{"id": "m", "contextWindow": 5, "maxTokens": 7}], reasoningEffort="low"))  # type: ignore[list-item]
    info = await custom.resolve_model("deepseek-official", "m")
    assert (info["context"], info["defaultMaxTokens"], info["reasoning"]["defaultEffort"]) == (
        {"contextWindow": 5},
        7,
        "low",
    )
    assert [m["id"] for m in await custom.list_models("deepseek-official")] == ["m"]


async def capture(options: dict[str, Any], config: Config | None = None) -> dict[str, Any]:
    async with MockModelServer(["success"]) as server:
        adapter = DeepSeekAdapter(config or Config(), base_url=server.base_url)
        chunks = await collect(adapter.stream({"model": MODEL, **options}))
        await adapter.aclose()
    assert chunks[-1]["type"] == "finish"
    return server.requests[0]


async def test_request_capture_headers_body_order_and_serialisation(tmp_path: Path) -> None:
    tools = [
        {"name": "bash", "description": "Run", "parameters": {"type": "object"}},
        {"name": "read", "description": "Read", "parameters": {"type": "object"}, "deferLoading": True},
    ]
    messages = [
        {
            "role": "system",
            "content": [{"type": "text", "text": "SYSTEM"}],
            "source": {"kind": "system-prompt"},
            "id": "s",
        },
        text("user", "prompt", "u1"),
        text("user", "runtime context", "u2"),
        assistant(
            {"type": "reasoning", "text": "think"},
            {"type": "text", "text": "ok"},
            call("c1"),
            call("c2", "not json"),
            replay_model=MODEL,
        ),
        tool_result("c1", "one"),
        tool_result("c2", "", error=True),
        text("user", "after tools", "u3"),
    ]
    request = await capture(
        {
            "messages": messages,
            "tools": tools,
            "sessionId": "sess-1",
            "reasoningEffort": "max",
            "maxTokens": 99,
            "stop": ["X"],
            "temperature": 0.5,
        }
    )
    assert request["path"] == "/v1/messages" and request["method"] == "POST"
    headers = request["headers"]
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "text/event-stream"
    assert headers["x-api-key"] == "sk-test"
    assert "authorization" not in headers
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["user-agent"].startswith("pydsh/")
    assert headers["x-deepseek-harness-session-id"] == "sess-1"
    user_id = (Path(os.environ["DSH_HOME"]) / ".anonymous-user-id").read_text()
    assert headers["x-deepseek-harness-user-id"] == user_id
    assert os.stat(Path(os.environ["DSH_HOME"]) / ".anonymous-user-id").st_mode & 0o777 == 0o600
    assert "x-deepseek-harness-compact" not in headers and "anthropic-beta" not in headers
    body = request["body"]
    assert list(body) == [
        "model",
        "stream",
        "messages",
        "max_tokens",
        "thinking",
        "output_config",
        "system",
        "temperature",
        "stop_sequences",
        "tools",
    ]
    assert (
        body["max_tokens"] == 99
        and body["thinking"] == {"type": "enabled"}
        and body["output_config"] == {"effort": "max"}
    )
    assert body["system"] == "SYSTEM"
    assert body["tools"] == [
        {"name": "bash", "description": "Run", "input_schema": {"type": "object"}},
        {"name": "read", "description": "Read", "input_schema": {"type": "object"}, "defer_loading": True},
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "prompt"}, {"type": "text", "text": "runtime context"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "think", "signature": "sig-a1"},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "c1", "name": "read", "input": {"file_path": "a.txt"}},
                {"type": "tool_use", "id": "c2", "name": "read", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": [{"type": "text", "text": "one"}],
                    "is_error": False,
                },
                {"type": "tool_result", "tool_use_id": "c2", "content": [], "is_error": True},
                {"type": "text", "text": "after tools"},
            ],
        },
    ]


async def test_tool_results_move_before_text_in_a_user_message() -> None:
    messages = [
        text("user", "go", "u1"),
        assistant(call("c1")),
        text("user", "steer", "u2"),
        tool_result("c1", "done"),
    ]
    body = (await capture({"messages": messages}))["body"]
    assert [p["type"] for p in body["messages"][2]["content"]] == ["tool_result", "text"]


async def test_signature_is_replayed_only_for_the_same_model() -> None:
    reasoning = {"type": "reasoning", "text": "r"}
    other = [
        text("user", "q", "u1"),
        assistant(reasoning, {"type": "text", "text": "a"}, replay_model="deepseek-flash"),
        text("user", "q2", "u2"),
    ]
    same = [
        text("user", "q", "u1"),
        assistant(reasoning, {"type": "text", "text": "a"}, replay_model=MODEL),
        text("user", "q2", "u2"),
    ]
    assert (await capture({"messages": other}))["body"]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "r",
    }
    assert (await capture({"messages": same}))["body"]["messages"][1]["content"][0]["signature"] == "sig-a1"
    broken = assistant(reasoning, replay_model=MODEL)
    broken["source"]["replayState"]["blocks"] = []
    body = (await capture({"messages": [text("user", "q", "u1"), broken, text("user", "q2", "u2")]}))["body"]
    assert body["messages"][1]["content"][0] == {"type": "thinking", "thinking": "r"}


@pytest.mark.parametrize(
    ("effort", "thinking", "output"),
    [
        ("off", {"type": "disabled"}, None),
        ("low", {"type": "enabled"}, {"effort": "low"}),
        ("high", {"type": "enabled"}, {"effort": "high"}),
    ],
)
async def test_thinking_and_output_config_per_effort(effort: str, thinking: dict[str, str], output: Any) -> None:
    body = (await capture({"messages": [text("user", "q", "u")], "reasoningEffort": effort}))["body"]
    assert body["thinking"] == thinking
    assert body.get("output_config") == output
    assert body["max_tokens"] == 256000


async def test_headers_for_compaction_tool_changes_and_no_attribution() -> None:
    developer = {
        "role": "developer",
        "content": [{"type": "tool-addition", "toolName": "grep"}],
        "source": {"kind": "tool-registry"},
        "id": "d",
    }
    request = await capture(
        {"messages": [text("user", "q", "u"), developer], "purpose": "compaction"},
        Config(attributionHeaders=False),
    )
    headers = request["headers"]
    assert headers["x-deepseek-harness-compact"] == "1"
    assert headers["anthropic-beta"] == "mid-conversation-tool-changes-2026-07-01"
    assert "x-deepseek-harness-user-id" not in headers
    assert request["body"]["messages"][-1] == {
        "role": "system",
        "content": [{"type": "tool_addition", "tool": {"type": "tool_reference", "name": "grep"}}],
    }


UNREACHABLE = "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [text("user", "q", "u"), assistant(call("c1"), call("c1")), tool_result("c1", "x")],
            "DeepSeek Messages duplicate tool call id",
        ),
        ([text("user", "q", "u"), tool_result("c9", "x")], "DeepSeek Messages tool result has no matching call"),
        (
            [text("user", "q", "u"), assistant(call("c1")), text("user", "no result", "u2")],
            "DeepSeek Messages tool calls need immediate results",
        ),
        ([text("user", "q", "u"), assistant(call("c1"))], "DeepSeek Messages history ends with unresolved tools"),
    ],
)
async def test_pre_send_validation(messages: list[dict[str, Any]], message: str) -> None:
    adapter = DeepSeekAdapter(Config(), base_url=UNREACHABLE)
    with pytest.raises(LlmError) as info:
        await collect(adapter.stream({"model": MODEL, "messages": messages}))
    assert (str(info.value), info.value.code) == (message, "INVALID_REQUEST")


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"reasoningEffort": "ultra"}, "UNSUPPORTED_REASONING_EFFORT"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "attachment": {}}], "source": {}, "id": "u"}]},
            "UNSUPPORTED_CONTENT",
        ),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "mystery"}], "source": {}, "id": "a"}]},
            "UNSUPPORTED_CONTENT",
        ),
    ],
)
async def test_unsupported_input_fails_before_io(options: dict[str, Any], code: str) -> None:
    adapter = DeepSeekAdapter(Config(), base_url=UNREACHABLE)
    with pytest.raises(LlmError) as info:
        await collect(adapter.stream({"model": MODEL, "messages": [], **options}))
    assert info.value.code == code
    if code == "UNSUPPORTED_REASONING_EFFORT":
        assert str(info.value) == "DeepSeek Messages does not support reasoning effort ultra"


async def test_effort_under_disabled_thinking_fails() -> None:
    adapter = DeepSeekAdapter(Config(thinking="disabled"), base_url=UNREACHABLE)
    with pytest.raises(LlmError) as info:
        await collect(adapter.stream({"model": MODEL, "messages": [], "reasoningEffort": "high"}))
    assert info.value.code == "UNSUPPORTED_REASONING_EFFORT"


async def test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY")
    adapter = DeepSeekAdapter(Config(), base_url=UNREACHABLE)
    with pytest.raises(LlmError) as info:
        await collect(adapter.stream({"model": MODEL, "messages": [text("user", "q", "u")]}))
    assert (
        str(info.value)
        == 'no API key for provider route "deepseek-official"; export DEEPSEEK_API_KEY in the launching environment'
    )
    assert info.value.code == "MISSING_CREDENTIAL"
    monkeypatch.setenv("DEEPSEEK_API_KEY", "bad\nkey")
    with pytest.raises(LlmError) as info:
        await collect(adapter.stream({"model": MODEL, "messages": [text("user", "q", "u")]}))
    assert info.value.code == "INVALID_CREDENTIAL"
    monkeypatch.delenv("DEEPSEEK_API_KEY")
    (Path(os.environ["DSH_HOME"]) / "credentials.json").write_text(json.dumps({"deepseek-official": "  stored-key \n"}))
    request = await capture({"messages": [text("user", "q", "u")]})
    assert request["headers"]["x-api-key"] == "stored-key"


# -- raw streams through httpx.MockTransport ---------------------------------------------------


def raw_adapter(body: str, status: int = 200, headers: dict[str, str] | None = None) -> DeepSeekAdapter:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body.encode(), headers=headers or {"content-type": "text/event-stream"})

    return DeepSeekAdapter(Config(), base_url="http://mock.invalid", transport=httpx.MockTransport(handler))


def data_lines(*events: dict[str, Any], named: bool = False) -> str:
    return "".join((f"event: {e['type']}\n" if named else "") + f"data: {json.dumps(e)}\n\n" for e in events)


async def raw_run(body: str, **kw: Any) -> list[dict[str, Any]]:
    return await collect(raw_adapter(body, **kw).stream({"model": MODEL, "messages": [text("user", "q", "u")]}))


async def test_minimal_accepted_messages_stream() -> None:
    body = data_lines(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 0}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "c1", "name": "read", "input": {"file_path": "a.txt"}},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    )
    chunks = await raw_run(body)
    end = next(c for c in chunks if c["type"] == "block-end")
    assert end["block"] == {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"file_path":"a.txt"}'}
    assert chunks[-2] == {"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 0, "totalTokens": 5}}
    assert chunks[-1]["reason"] == {"kind": "tool-calls"}
    assert chunks[-1]["replayState"] == {
        "response": {"kind": "deepseek-messages", "version": 1, "model": MODEL},
        "blocks": [{"type": "tool-call"}],
    }


async def test_a_finished_stream_frees_its_response_without_the_cyclic_collector() -> None:
    """httpx binds a response and its stream to each other; a closed one is unbound, so a paced server
    (which runs the cyclic collector rarely) does not keep every response of a step around."""
    responses: list[weakref.ref[httpx.Response]] = []
    body = data_lines(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "done"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    )

    def handler(request: httpx.Request) -> httpx.Response:
        response = httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})
        responses.append(weakref.ref(response))
        return response

    adapter = DeepSeekAdapter(Config(), base_url="http://mock.invalid", transport=httpx.MockTransport(handler))
    gc.disable()
    try:
        chunks = await collect(adapter.stream({"model": MODEL, "messages": [text("user", "q", "u")]}))
        assert chunks[-1]["type"] == "finish"
        assert [ref() for ref in responses] == [None]
    finally:
        gc.enable()


async def test_usage_mapping_and_served_model() -> None:
    body = data_lines(
        {
            "type": "message_start",
            "message": {
                "model": "deepseek-flash",
                "usage": {"input_tokens": 100, "output_tokens": 0, "cache_read_input_tokens": 40},
            },
        },
        {"type": "ping"},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "thinking", "thinking": "", "signature": "s1"},
        },
        {"type": "content_block_delta", "index": 3, "delta": {"type": "signature_delta", "signature": "-s2"}},
        {"type": "content_block_stop", "index": 3},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "Hi"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    )
    chunks = await raw_run(body)
    assert chunks[-2]["usage"] == {"inputTokens": 100, "outputTokens": 7, "cacheReadTokens": 40, "totalTokens": 147}
    assert [c["index"] for c in chunks if "index" in c] == [0, 0, 1, 1, 1]
    assert chunks[-1]["replayState"] == {
        "response": {"kind": "deepseek-messages", "version": 1, "model": "deepseek-flash"},
        "blocks": [{"type": "reasoning", "signature": "s1-s2"}, {"type": "text"}],
    }


START = {"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 0}}}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (data_lines({"type": "message_start", "message": {}}), "DeepSeek Messages stream: message_start without usage"),
        (
            'event: message_stop\ndata: {"type":"message_start","message":{"usage":{}}}\n\n',
            "DeepSeek Messages SSE event type mismatch",
        ),
        ("data: [1]\n\n", "DeepSeek Messages SSE contains invalid JSON"),
        (data_lines(START, START), "DeepSeek Messages stream: duplicate message_start"),
        (data_lines({"type": "message_stop"}), "DeepSeek Messages stream: event precedes message_start"),
        (
            data_lines(START, {"type": "message_delta", "delta": {"stop_reason": "pause"}}),
            "DeepSeek Messages stream: unsupported stop reason pause",
        ),
        (
            data_lines(
                START,
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": "", "name": "x", "input": {}},
                },
            ),
            "DeepSeek Messages stream: empty tool identity",
        ),
        (
            data_lines(
                START,
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}},
            ),
            "DeepSeek Messages stream: unsupported delta input_json_delta for text",
        ),
        (
            data_lines(
                START,
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": "c", "name": "x", "input": {}},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "{oops"},
                },
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
                {"type": "message_stop"},
            ),
            "DeepSeek Messages stream: tool input is invalid JSON",
        ),
        (
            data_lines(START, {"type": "message_stop"}),
            "DeepSeek Messages stream: message_stop without settled blocks and stop reason",
        ),
        (
            data_lines(START, {"type": "message_start", "message": {"usage": {"input_tokens": -1}}}),
            "DeepSeek Messages stream: duplicate message_start",
        ),
        (
            data_lines({"type": "message_start", "message": {"usage": {"input_tokens": -1}}}),
            "DeepSeek Messages stream: invalid input_tokens",
        ),
        (
            data_lines(
                START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": 5}}
            ),
            "DeepSeek Messages stream: text block with non-string text",
        ),
        (
            data_lines(
                START,
                {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ["x"]}},
            ),
            "DeepSeek Messages stream: thinking block with non-string thinking",
        ),
    ],
)
async def test_malformed_streams(body: str, message: str) -> None:
    with pytest.raises(LlmError) as info:
        await raw_run(body)
    assert (str(info.value), info.value.code) == (message, "MALFORMED_RESPONSE")


async def test_a_long_answer_assembles_from_its_deltas_in_order() -> None:
    pieces = [f"{n:05d}|" for n in range(3000)]
    body = data_lines(
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "start:"}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}} for p in pieces),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    )
    chunks = await raw_run(body)
    deltas = [c["text"] for c in chunks if c["type"] == "text-delta"]
    assert deltas == ["start:", *pieces]
    ends = [c for c in chunks if c["type"] == "block-end"]
    assert ends[0]["block"] == {"type": "text", "text": "start:" + "".join(pieces)}


async def test_unsupported_response_block_and_in_band_error() -> None:
    block = data_lines(START, {"type": "content_block_start", "index": 0, "content_block": {"type": "image"}})
    with pytest.raises(LlmError) as info:
        await raw_run(block)
    assert (str(info.value), info.value.code) == (
        "DeepSeek Messages does not support response block image",
        "UNSUPPORTED_CONTENT",
    )
    quota = data_lines({"type": "error", "error": {"type": "api_error", "message": "credit balance exhausted"}})
    with pytest.raises(LlmError) as info:
        await raw_run(quota)
    assert info.value.code == "QUOTA" and info.value.status is None


async def test_named_events_comments_and_truncated_tail() -> None:
    body = (
        ": keep-alive\n\n"
        + data_lines(
            START,
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
            named=True,
        )
        + 'event: message_stop\ndata: {"type":"message_stop"}'
    )
    with pytest.raises(LlmError) as info:
        await raw_run(body)
    assert (str(info.value), info.value.code) == ("DeepSeek Messages stream ended before message_stop", "STREAM_CLOSED")


async def test_redirects_no_body_and_http_errors() -> None:
    with pytest.raises(LlmError) as info:
        await raw_run("", status=307, headers={"location": "http://elsewhere.invalid/"})
    assert (str(info.value), info.value.code) == ("DeepSeek Messages refused a redirect", "TRANSPORT")
    with pytest.raises(LlmError) as info:
        await raw_run("", headers={"content-type": "text/event-stream", "content-length": "0"})
    assert (str(info.value), info.value.code) == ("DeepSeek Messages returned no response body", "EMPTY_RESPONSE")
    boom = json.dumps({"type": "error", "error": {"type": "api_error", "message": "boom"}})
    with pytest.raises(LlmError) as info:
        await raw_run(boom, status=500, headers={"x-deepseek-request-id": "r9"})
    assert info.value.failure() == {"message": "boom", "code": "SERVER", "status": 500, "requestId": "r9"}
    with pytest.raises(LlmError) as info:
        await raw_run("<html>", status=418, headers={"retry-after": "1.5"})
    assert info.value.failure() == {
        "message": "DeepSeek Messages request failed (418)",
        "code": "HTTP_418",
        "status": 418,
        "providerRetryAfterMs": 1500,
    }


async def test_plugin_uses_deepseek_base_url_and_imports_httpx_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    async with MockModelServer(["success"]) as server:
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        k = Kernel()
        await k.load([Row(id="llm", name="llm"), Row(id="llm-deepseek", name="llm-deepseek")])
        llm = k.ctx.require(LLM)
        prepared = await llm.prepare_call({"provider": "deepseek-official", "model": MODEL})
        assert prepared.config == {
            "provider": "deepseek-official",
            "model": MODEL,
            "maxTokens": 256000,
            "reasoningEffort": "high",
        }
        assert prepared.adapter_defaults == {"reasoningEffort": True, "maxTokens": True}
        assert prepared.context_window == 1000000
        chunks = await collect(prepared.stream({**prepared.config, "messages": [text("user", "q", "u")]}))
        assert chunks[-1]["reason"]["kind"] == "stop"
        await k.dispose()
    code = "import sys, pydsh.llm.deepseek, pydsh.llm.openai_compat, pydsh.llm.service; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def ok_stream() -> bytes:
    """A whole Messages stream answering "ok"."""
    return data_lines(
        {"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ).encode()


async def test_a_non_ascii_session_id_is_percent_encoded_in_its_header() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=ok_stream(), headers={"content-type": "text/event-stream"})

    adapter = DeepSeekAdapter(Config(), base_url="http://mock.invalid", transport=httpx.MockTransport(handler))
    await collect(adapter.stream({"model": MODEL, "messages": [text("user", "q", "u")], "sessionId": "café 1"}))
    await collect(adapter.stream({"model": MODEL, "messages": [text("user", "q", "u")], "sessionId": "plain-id"}))
    assert [r.headers["x-deepseek-harness-session-id"] for r in seen] == ["caf%C3%A9%201", "plain-id"]


async def test_a_finished_stream_is_read_to_its_end_within_a_bound() -> None:
    """``drain`` consumes what follows the last event (so the connection is reused), and gives up on a body
    that never ends instead of waiting for the idle timeout."""
    read: list[tuple[str, str]] = []

    async def finite() -> AsyncIterator[tuple[str, str]]:
        for event in (("ping", ""), ("", "trailing")):
            read.append(event)
            yield event

    async def endless() -> AsyncIterator[tuple[str, str]]:
        yield ("ping", "")
        await asyncio.Event().wait()

    await drain(finite())
    await drain(endless())
    assert read == [("ping", ""), ("", "trailing")]


async def test_more_concurrent_calls_than_a_default_pool_holds_all_reach_the_model() -> None:
    """One process may host hundreds of agents at once: the pool caps none of their model calls (httpx's
    default of 100 connections made the rest queue, and fail after the pool timeout)."""
    calls = 120
    waiting: list[dict[str, Any]] = []
    arrived = asyncio.Event()

    async def hold(body: dict[str, Any]) -> None:
        waiting.append(body)
        if len(waiting) == calls:
            arrived.set()
        await arrived.wait()

    async with MockModelServer(["success"], repeat_last=True, hold=hold) as server:
        adapter = DeepSeekAdapter(Config(), base_url=server.base_url)
        messages = [text("user", "hi", "u1")]
        runs = [collect(adapter.stream({"model": MODEL, "messages": messages})) for _ in range(calls)]
        results = await asyncio.gather(*runs)
        await adapter.aclose()
    assert [r[-1]["type"] for r in results] == ["finish"] * calls


async def test_sessions_spread_over_a_few_pools_each_keeping_to_its_own() -> None:
    """A pool costs time in the number of its connections at every call, so sessions do not all share one."""
    made: list[object] = []

    def make() -> Any:
        made.append(object())
        return made[-1]

    clients = http.Clients(make)
    sessions = [f"session-{i}" for i in range(200)]
    chosen = [clients.get(s) for s in sessions]
    assert [clients.get(s) for s in sessions] == chosen
    assert 1 < len(made) <= http.SHARDS
    assert clients.get(None) is clients.get(None)


async def test_the_pools_of_tls_endpoints_load_the_ca_bundle_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the CA bundle takes about 90 ms: the adapter's many pools share one TLS context."""
    import ssl

    loaded: list[ssl.SSLContext] = []
    create = httpx.create_ssl_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        loaded.append(create(*args, **kwargs))
        return loaded[-1]

    monkeypatch.setattr(httpx, "create_ssl_context", counted)
    http.tls_context.cache_clear()
    clients = [http.make_client(1000, 1000, ["https://api.deepseek.com"]) for _ in range(3)]
    assert len(loaded) == 1
    plain = http.make_client(1000, 1000, ["http://127.0.0.1:9"])
    assert len(loaded) == 1, "a plain-HTTP endpoint loaded the CA bundle"
    for client in [*clients, plain]:
        await client.aclose()
    http.tls_context.cache_clear()


async def test_no_cookie_a_provider_sets_is_sent_back() -> None:
    """The reference's ``fetch`` keeps no cookie jar; neither do the model clients."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        headers = {"content-type": "text/event-stream", "set-cookie": "lb=node-7; Path=/"}
        return httpx.Response(200, content=ok_stream(), headers=headers)

    adapter = DeepSeekAdapter(Config(), base_url="http://mock.invalid", transport=httpx.MockTransport(handler))
    for _ in range(2):
        await collect(adapter.stream({"model": MODEL, "messages": [text("user", "q", "u")], "sessionId": "s"}))
    await adapter.aclose()
    assert [r.headers.get("cookie") for r in seen] == [None, None]
