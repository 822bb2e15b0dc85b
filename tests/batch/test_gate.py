"""The route gate: a 429 closes its route in the shared store for the Retry-After; calls wait for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pydsh.batch.gate import FileGate, RouteGate
from pydsh.kernel.cancel import AbortController, AbortError
from pydsh.llm.types import LlmError, StreamChunk


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def raising(error: LlmError) -> AsyncIterator[StreamChunk]:
    raise error
    yield {"type": "finish", "reason": {"kind": "stop"}}


async def finishing(failure: dict[str, Any]) -> AsyncIterator[StreamChunk]:
    yield {"type": "text-delta", "index": 0, "text": "x"}  # type: ignore[typeddict-item]
    yield {"type": "finish", "reason": {"kind": "error", "failure": failure}}  # type: ignore[typeddict-item]


async def drain(gate: RouteGate, route: str, source: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    async def nxt() -> AsyncIterator[StreamChunk]:
        return source

    stream = await gate({"provider": route}, nxt)
    assert stream is not None
    return [chunk async for chunk in stream]


async def test_a_rate_limit_closes_its_route_for_the_retry_after(tmp_path: Path) -> None:
    clock = Clock()
    store = FileGate(tmp_path / "gates")
    gate = RouteGate(store, clock)
    with pytest.raises(LlmError):
        await drain(
            gate, "deepseek-official", raising(LlmError("slow down", "RATE_LIMIT", provider_retry_after_ms=2500))
        )
    assert await store.opens_at("deepseek-official") == 1002.5
    assert await store.opens_at("openai-compat") == 0.0

    chunks = await drain(gate, "openai-compat", finishing({"message": "busy", "code": "RATE_LIMIT"}))
    assert chunks[-1]["type"] == "finish"
    assert await store.opens_at("openai-compat") == 1001.0

    await store.pause_until("deepseek-official", 1001.0)
    assert await store.opens_at("deepseek-official") == 1002.5
    clock.now = 1003.0
    await drain(gate, "deepseek-official", finishing({"message": "down", "code": "SERVER"}))
    assert await FileGate(tmp_path / "gates").opens_at("deepseek-official") == 1002.5


async def test_a_call_on_a_closed_route_waits_and_an_abort_ends_the_wait(tmp_path: Path) -> None:
    clock = Clock()
    store = FileGate(tmp_path)
    await store.pause_until("r", clock.now + 3600)
    controller = AbortController()
    controller.abort({"kind": "user"})
    with pytest.raises(AbortError):
        await RouteGate(store, clock).wait("r", controller.signal)
    await RouteGate(store, lambda: clock.now + 3600).wait("r", controller.signal)
