"""Every mock behaviour (spec 04 §9.2) against both HTTP adapters, abort during a stall, cassette round trip."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import Kernel
from pydsh.kernel.cancel import AbortController, AbortSignal
from pydsh.llm.deepseek import Config as DeepSeekConfig
from pydsh.llm.deepseek import DeepSeekAdapter
from pydsh.llm.openai_compat import OpenAICompatAdapter, ProviderConfig
from pydsh.llm.scripted import ReplayAdapter
from pydsh.llm.service import LlmService
from pydsh.llm.stream_records import AssistantStreamAccumulator, BlockAssembler
from pydsh.session.events import make_header
from pydsh.session.log import Session
from pydsh.testing.mock_model_server import MockModelServer

USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "id": "u1"}]
RID = "req-mock-1"
SUCCESS_TEXT = "Hello from the mock model."

# behaviour -> (finish kind, code, status, providerRetryAfterMs, carries the request id)
OUTCOMES: dict[str, tuple[str, str | None, int | None, float | None, bool]] = {
    "success": ("stop", None, None, None, False),
    "slow_success": ("stop", None, None, None, False),
    "reasoning_success": ("stop", None, None, None, False),
    "tool_call_success": ("tool-calls", None, None, None, False),
    "max_tokens": ("max-tokens", None, None, None, False),
    "wrong_content_type": ("stop", None, None, None, False),
    "empty": ("error", "EMPTY_RESPONSE", None, None, True),
    "empty_body": ("error", "STREAM_CLOSED", None, None, True),
    "stream_eof": ("error", "STREAM_CLOSED", None, None, True),
    "partial_eof": ("error", "STREAM_CLOSED", None, None, True),
    "connection_reset": ("error", "TRANSPORT", None, None, False),
    "stream_disconnect": ("error", "TRANSPORT", None, None, True),
    "partial_disconnect": ("error", "TRANSPORT", None, None, True),
    "stall": ("error", "TIMEOUT", None, None, True),
    "malformed_json": ("error", "MALFORMED_RESPONSE", None, None, True),
    "malformed_event": ("error", "MALFORMED_RESPONSE", None, None, True),
    "rate_limit": ("error", "RATE_LIMIT", 429, 1000, True),
    "server_error": ("error", "SERVER", 500, None, True),
    "service_unavailable": ("error", "SERVER", 503, None, True),
    "auth_error": ("error", "AUTH", 401, None, True),
    "invalid_request": ("error", "INVALID_REQUEST", 400, None, True),
    "context_overflow": ("error", "CONTEXT_WINDOW_EXCEEDED", 400, None, True),
    "quota_exceeded": ("error", "QUOTA", 429, None, True),
    "error_event": ("error", "SERVER", None, None, True),
}


def route(kind: str, base_url: str, idle_ms: int = 200) -> tuple[LlmService, Any, str]:
    k = Kernel()
    svc = LlmService(k.ctx)
    adapter: Any
    if kind == "deepseek":
        adapter = DeepSeekAdapter(DeepSeekConfig(streamIdleTimeoutMs=idle_ms), base_url=base_url)
        provider = "deepseek-official"
    else:
        adapter = OpenAICompatAdapter(
            [ProviderConfig(id="local", baseURL=base_url + "/v1", streamIdleTimeoutMs=idle_ms)]
        )
        provider = "local"
    svc.register_adapter(k.ctx, [provider], adapter)
    return svc, adapter, provider


async def collect(it: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c async for c in it]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")


@pytest.mark.parametrize("kind", ["deepseek", "chat"])
@pytest.mark.parametrize("behaviour", sorted(OUTCOMES))
async def test_behaviour_outcomes(kind: str, behaviour: str) -> None:
    finish_kind, code, status, retry_after, has_rid = OUTCOMES[behaviour]
    async with MockModelServer([behaviour], requestId=RID, chunkDelayMs=1) as server:
        svc, adapter, provider = route(kind, server.base_url)
        chunks = await collect(svc.stream({"provider": provider, "model": "deepseek-v4-flash", "messages": USER}))
        await adapter.aclose()
    finish = chunks[-1]
    assert [c["type"] for c in chunks].count("finish") == 1
    assert finish["reason"]["kind"] == finish_kind
    asm = BlockAssembler()
    for chunk in chunks:
        asm.add(chunk)
    if code is None:
        text = "".join(b["text"] for b in asm.content() if b["type"] == "text")
        assert text == ("" if behaviour == "tool_call_success" else SUCCESS_TEXT)
        return
    failure = finish["reason"]["failure"]
    assert failure["code"] == code
    assert failure.get("status") == status
    assert failure.get("providerRetryAfterMs") == retry_after
    assert failure.get("requestId") == (RID if has_rid else None)
    if behaviour in ("partial_eof", "partial_disconnect"):
        assert [b["text"] for b in asm.interrupted_blocks()] == ["Partial answer"]


@pytest.mark.parametrize("kind", ["deepseek", "chat"])
async def test_reasoning_and_tool_call_shapes(kind: str) -> None:
    async with MockModelServer(["reasoning_success", "tool_call_success"]) as server:
        svc, adapter, provider = route(kind, server.base_url)
        options = {"provider": provider, "model": "deepseek-v4-flash", "messages": USER}
        first = BlockAssembler()
        for chunk in await collect(svc.stream(options)):
            first.add(chunk)
        second = BlockAssembler()
        for chunk in await collect(svc.stream(options)):
            second.add(chunk)
        await adapter.aclose()
    assert [b["type"] for b in first.content()] == ["reasoning", "text"]
    assert first.content()[0]["text"] == "Thinking it over."
    if kind == "deepseek":
        assert first.replay_state is not None
        assert first.replay_state["blocks"][0] == {"type": "reasoning", "signature": "mock-signature"}
    call = second.content()[0]
    assert (call["type"], call["name"], json.loads(call["arguments"])) == ("tool-call", "mock_tool", {"value": "mock"})


@pytest.mark.parametrize("kind", ["deepseek", "chat"])
async def test_abort_during_stall_finishes_aborted_and_closes_the_response(kind: str) -> None:
    async with MockModelServer(["stall"]) as server:
        svc, adapter, provider = route(kind, server.base_url, idle_ms=60_000)
        controller = AbortController()
        options = {"provider": provider, "model": "deepseek-v4-flash", "messages": USER, "signal": controller.signal}
        task = asyncio.create_task(collect(svc.stream(options)))
        while not server.requests:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        controller.abort({"kind": "user"})
        chunks = await asyncio.wait_for(task, 5)
        assert chunks == [
            {
                "type": "finish",
                "reason": {
                    "kind": "aborted",
                    "failure": {"message": chunks[0]["reason"]["failure"]["message"], "code": "ABORTED"},
                },
            }
        ]
        for _ in range(200):
            if not server._connections:
                break
            await asyncio.sleep(0.005)
        assert not server._connections
        await adapter.aclose()


class CountingSignal(AbortSignal):
    """An abort signal that counts its registrations."""

    def __init__(self) -> None:
        super().__init__()
        self.registrations = 0

    def add_callback(self, fn: Callable[[object], None]) -> Callable[[], None]:
        self.registrations += 1
        return super().add_callback(fn)


@pytest.mark.parametrize("kind", ["deepseek", "chat"])
async def test_one_abort_registration_per_stream_whatever_its_length(kind: str) -> None:
    counts = []
    for chunk_size in (64, 1):
        async with MockModelServer(["success"], successText="word " * 40, chunkSize=chunk_size) as server:
            svc, adapter, provider = route(kind, server.base_url)
            signal = CountingSignal()
            options = {"provider": provider, "model": "deepseek-v4-flash", "messages": USER, "signal": signal}
            chunks = await collect(svc.stream(options))
            await adapter.aclose()
        assert chunks[-1]["reason"]["kind"] == "stop"
        counts.append(signal.registrations)
    assert counts[0] == counts[1] <= 2


@pytest.mark.parametrize("kind", ["deepseek", "chat"])
async def test_abort_between_events_leaves_the_consumer_alone_and_ends_the_stream(kind: str) -> None:
    async with MockModelServer(["success"], successText="word " * 40, chunkSize=1) as server:
        svc, adapter, provider = route(kind, server.base_url)
        controller = AbortController()
        options = {"provider": provider, "model": "deepseek-v4-flash", "messages": USER, "signal": controller.signal}
        chunks = []
        async for chunk in svc.stream(options):
            chunks.append(chunk)
            if len(chunks) == 2:
                controller.abort({"kind": "user"})
                await asyncio.sleep(0.01)
        await adapter.aclose()
    assert len(chunks) == 3
    assert chunks[-1]["reason"]["kind"] == "aborted"


async def test_cassette_round_trip(tmp_path: Path) -> None:
    """Record two calls with the mock into a session log, replay them with ReplayAdapter, compare content."""
    session = Session(make_header("rec", 1, cwd="/w"))
    session.append("turn/start", {"turn": 1})
    recorded = []
    async with MockModelServer(["tool_call_success", "reasoning_success"]) as server:
        svc, adapter, provider = route("deepseek", server.base_url)
        for step in (1, 2):
            session.append("step/start", {"turn": 1, "step": step})
            acc, asm = AssistantStreamAccumulator(), BlockAssembler()
            for n, chunk in enumerate(
                await collect(svc.stream({"provider": provider, "model": "deepseek-v4-flash", "messages": USER}))
            ):
                acc.add(chunk, 1000 + n)
                asm.add(chunk)
            source = {
                "kind": "model",
                "provider": provider,
                "model": "deepseek-v4-flash",
                "replayState": asm.replay_state,
            }
            message = {"role": "assistant", "content": asm.content(), "source": source, "id": f"a{step}"}
            data = {"turn": 1, "step": step, "message": message, "usage": asm.usage, "stream": acc.records()}
            session.append("assistant/message", data, surface_op="append")
            recorded.append(asm.content())
            if step == 1:
                call = asm.content()[0]
                session.append(
                    "tool/call",
                    {"turn": 1, "step": 1, "callId": call["id"], "name": call["name"], "arguments": call["arguments"]},
                )
                result = {"role": "tool", "source": {"kind": "tool", "callId": call["id"]}, "toolCallId": call["id"]}
                result |= {"content": [{"type": "text", "text": "ok"}], "isError": False, "id": "t1"}
                session.append(
                    "tool/result",
                    {"turn": 1, "step": 1, "message": result},
                    surface_op="append",
                    source_event_seqs=[session.seq],
                )
            session.append("step/end", {"turn": 1, "step": step})
        await adapter.aclose()
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path = tmp_path / "session.v4.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in [session.header, *session.events]) + "\n")

    replay = ReplayAdapter(path)
    k = Kernel()
    svc = LlmService(k.ctx)
    svc.register_adapter(k.ctx, ["deepseek-official"], replay)
    replayed = []
    for _ in recorded:
        asm = BlockAssembler()
        for chunk in await collect(
            svc.stream(
                {"provider": "deepseek-official", "model": "deepseek-v4-flash", "messages": [], "sessionId": "x"}
            )
        ):
            asm.add(chunk)
        replayed.append(asm.content())
    assert replayed == recorded
    replay.assert_consumed()
