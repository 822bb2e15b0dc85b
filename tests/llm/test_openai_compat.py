"""The chat-completions adapter: routes, request body, message mapping, stream parsing, usage (spec 04 §5)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from pydsh.kernel import Kernel
from pydsh.kernel.compose import Row
from pydsh.llm.keys import LLM
from pydsh.llm.openai_compat import ChatTranslator, OpenAICompatAdapter, ProviderConfig, map_usage, shipped_providers
from pydsh.llm.types import LlmError
from pydsh.testing.mock_model_server import MockModelServer


async def collect(it: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c async for c in it]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "id": "u"}


HISTORY = [
    {"role": "system", "content": [{"type": "text", "text": "SYS"}], "source": {"kind": "system-prompt"}, "id": "s"},
    user("q"),
    {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "hmm"},
            {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"file_path":"a"}'},
        ],
        "source": {"kind": "model"},
        "id": "a",
    },
    {
        "role": "tool",
        "source": {"kind": "tool", "callId": "c1"},
        "toolCallId": "c1",
        "content": [],
        "isError": False,
        "id": "t",
    },
    {
        "role": "developer",
        "content": [{"type": "text", "text": "note"}, {"type": "tool-addition", "toolName": "x"}],
        "source": {"kind": "tool-registry"},
        "id": "d",
    },
]


async def capture(config: ProviderConfig, **options: Any) -> dict[str, Any]:
    async with MockModelServer(["success"]) as server:
        routed = config.model_copy(update={"baseURL": server.base_url + "/v1"})
        adapter = OpenAICompatAdapter([routed])
        chunks = await collect(adapter.stream({"provider": config.id, "model": "m", **options}))
        await adapter.aclose()
    assert chunks[-1]["reason"]["kind"] == "stop"
    return server.requests[0]


async def test_deepseek_dialect_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-1")
    config = ProviderConfig(id="deepseek-openai", baseURL="http://x", apiKeyEnv="DEEPSEEK_API_KEY", dialect="deepseek")
    tools = [{"name": "read", "description": "Read", "parameters": {"type": "object"}}]
    request = await capture(
        config, messages=HISTORY, tools=tools, reasoningEffort="high", maxTokens=50, stop=["Z"], sessionId="sid"
    )
    assert request["path"] == "/v1/chat/completions"
    headers = request["headers"]
    assert headers["authorization"] == "Bearer sk-1"
    assert headers["x-deepseek-harness-session-id"] == "sid"
    assert headers["user-agent"].startswith("pydsh/")
    body = request["body"]
    assert list(body) == [
        "model",
        "messages",
        "stream",
        "stream_options",
        "thinking",
        "reasoning_effort",
        "tools",
        "max_tokens",
        "stop",
    ]
    assert body["thinking"] == {"type": "enabled"} and body["reasoning_effort"] == "high"
    assert body["tools"] == [
        {"type": "function", "function": {"name": "read", "description": "Read", "parameters": {"type": "object"}}}
    ]
    assert body["messages"] == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "hmm",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"file_path":"a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "(no output)"},
        {"role": "system", "content": "note"},
    ]
    off = (await capture(config, messages=[user("q")], reasoningEffort="off"))["body"]
    assert off["thinking"] == {"type": "disabled"} and "reasoning_effort" not in off


async def test_generic_dialect_sends_no_thinking_and_no_auth_by_default() -> None:
    request = await capture(
        ProviderConfig(id="local", baseURL="http://x", includeUsage=False), messages=HISTORY, reasoningEffort="high"
    )
    body = request["body"]
    assert list(body) == ["model", "messages", "stream"]
    assert "reasoning_content" not in body["messages"][2]
    assert "authorization" not in request["headers"]
    assert not any(h.startswith("x-deepseek-harness") for h in request["headers"])


async def test_unknown_deepseek_effort_and_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = OpenAICompatAdapter([ProviderConfig(id="d", baseURL="http://127.0.0.1:9", dialect="deepseek")])
    with pytest.raises(LlmError) as info:
        await collect(adapter.stream({"provider": "d", "model": "m", "messages": [], "reasoningEffort": "ultra"}))
    assert (str(info.value), info.value.code) == (
        'DeepSeek does not support reasoning effort "ultra"',
        "UNSUPPORTED_REASONING_EFFORT",
    )
    keyed = OpenAICompatAdapter([ProviderConfig(id="k", baseURL="http://127.0.0.1:9", apiKeyEnv="NO_SUCH_KEY_ENV")])
    with pytest.raises(LlmError) as info:
        await collect(keyed.stream({"provider": "k", "model": "m", "messages": []}))
    assert info.value.code == "MISSING_CREDENTIAL"


def test_usage_mapping() -> None:
    assert map_usage({"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}) == {
        "inputTokens": 6,
        "outputTokens": 3,
        "cacheReadTokens": 4,
        "totalTokens": 13,
    }
    assert map_usage(
        {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "prompt_cache_hit_tokens": 2,
            "completion_tokens_details": {"reasoning_tokens": 4},
        }
    ) == {
        "inputTokens": 8,
        "outputTokens": 5,
        "cacheReadTokens": 2,
        "reasoningTokens": 4,
        "totalTokens": 15,
    }


def feed_all(*payloads: Any) -> list[dict[str, Any]]:
    t = ChatTranslator()
    out: list[dict[str, Any]] = []
    for p in payloads:
        out += t.feed(p if isinstance(p, str) else json.dumps(p))
    return out


def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def test_stream_parsing_rules() -> None:
    chunks = feed_all(
        delta({"role": "assistant", "content": "", "reasoning_content": ""}),
        delta({"reasoning": "think"}),
        delta({"content": "hi"}),
        delta({"tool_calls": [{"function": {"name": "read", "arguments": '{"a":'}}]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        delta({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}},
        "[DONE]",
    )
    types = [c["type"] for c in chunks]
    assert types == [
        "block-start",
        "reasoning-delta",
        "block-start",
        "text-delta",
        "block-start",
        "tool-call-delta",
        "tool-call-delta",
        "block-end",
        "block-end",
        "block-end",
        "usage",
        "finish",
    ]
    assert chunks[5] == {"type": "tool-call-delta", "index": 2, "id": "", "name": "read", "argumentsDelta": '{"a":'}
    assert chunks[9]["block"] == {"type": "tool-call", "id": "call_2", "name": "read", "arguments": '{"a":1}'}
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


@pytest.mark.parametrize(
    ("payloads", "finish"),
    [
        ([delta({"content": "x"}, "length"), "[DONE]"], {"kind": "max-tokens"}),
        ([delta({"content": "x"}), "[DONE]"], {"kind": "stop"}),
        (
            [delta({"content": "x"}, "content_filter"), "[DONE]"],
            {"kind": "error", "failure": {"message": "model stopped: content_filter", "code": "CONTENT_FILTER"}},
        ),
    ],
)
def test_finish_reasons(payloads: list[Any], finish: dict[str, Any]) -> None:
    assert feed_all(*payloads)[-1] == {"type": "finish", "reason": finish}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("{nope", "malformed SSE payload: {nope"),
        ({"choices": {}}, "chat completions stream: choices is not a list"),
        ({"choices": [None]}, "chat completions stream: a choice is not an object"),
    ],
)
def test_malformed_payloads(payload: Any, message: str) -> None:
    with pytest.raises(LlmError) as info:
        feed_all(payload)
    assert (str(info.value), info.value.code) == (message, "MALFORMED_RESPONSE")


def test_empty_completion() -> None:
    with pytest.raises(LlmError) as info:
        feed_all(delta({}, "stop"), "[DONE]")
    assert (str(info.value), info.value.code) == (
        "model returned a completed response with no content",
        "EMPTY_RESPONSE",
    )


async def test_http_error_classification_order() -> None:
    def adapter_for(status: int, body: dict[str, Any]) -> OpenAICompatAdapter:
        transport = httpx.MockTransport(lambda _r: httpx.Response(status, json=body))
        return OpenAICompatAdapter([ProviderConfig(id="r", baseURL="http://mock.invalid")], transport=transport)

    cases = [
        (403, {"error": {"message": "insufficient quota"}}, "AUTH"),
        (413, {"error": {"message": "too big"}}, "INVALID_REQUEST"),
        (400, {"error": {"message": "x", "code": "insufficient_quota"}}, "QUOTA"),
        (400, {"error": {"message": "This model's maximum context length is 8192 tokens"}}, "CONTEXT_WINDOW_EXCEEDED"),
        (400, {"error": {"message": "bad"}}, "INVALID_REQUEST"),
        (502, {}, "SERVER"),
        (409, {}, "HTTP_409"),
    ]
    for status, body, code in cases:
        with pytest.raises(LlmError) as info:
            await collect(adapter_for(status, body).stream({"provider": "r", "model": "m", "messages": []}))
        assert info.value.code == code, (status, body)
    with pytest.raises(LlmError) as info:
        await collect(adapter_for(409, {}).stream({"provider": "r", "model": "m", "messages": []}))
    assert str(info.value) == "chat completions API error (HTTP 409)"


def test_shipped_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [p.id for p in shipped_providers()] == ["deepseek-openai"]
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    routes = shipped_providers()
    assert [(p.id, p.dialect, p.apiKeyEnv) for p in routes] == [
        ("deepseek-openai", "deepseek", "DEEPSEEK_API_KEY"),
        ("openai-compat", "generic", None),
    ]
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert shipped_providers()[1].apiKeyEnv == "OPENAI_API_KEY"


async def test_plugin_registers_configured_routes_with_model_info() -> None:
    k = Kernel()
    config = {
        "providers": [
            {
                "id": "vllm",
                "baseURL": "http://127.0.0.1:8000/v1",
                "models": [{"id": "qwen", "contextWindow": 32768}],
                "reasoning": {"efforts": ["low"], "defaultEffort": "low"},
            }
        ]
    }
    await k.load([Row(id="llm", name="llm"), Row(id="llm-openai-compat", name="llm-openai-compat", config=config)])
    llm = k.ctx.require(LLM)
    assert [p["id"] for p in llm.list_providers()] == ["vllm"]
    prepared = await llm.prepare_call({"provider": "vllm", "model": "qwen"})
    assert prepared.config == {"provider": "vllm", "model": "qwen", "reasoningEffort": "low"}
    assert prepared.context_window == 32768
    other = await llm.prepare_call({"provider": "vllm", "model": "unlisted"})
    assert other.context_window == 131072
    await k.dispose()
    assert not llm.has_adapter("vllm")
