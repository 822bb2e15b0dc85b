"""Throughput of the model layer: mock → DeepSeek adapter → service normaliser → records/assembly.

Run: python bench/llm_stream.py [calls]

In the same run it reads the same streams with nothing but httpx + httpx-sse + ``json.loads`` (the
floor) and prints pydsh's overhead per SSE event above it (target: at most 10 µs).

Also times folding one long answer (10,000 text deltas of 1 KiB) into content blocks, and reading it
through the DeepSeek adapter's event translator, which must both stay linear in the answer's length.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time

import httpx
import httpx_sse

from pydsh.kernel import Kernel
from pydsh.llm.deepseek import Config, DeepSeekAdapter, MessagesTranslator
from pydsh.llm.service import LlmService
from pydsh.llm.stream_records import AssistantStreamAccumulator, BlockAssembler
from pydsh.testing.mock_model_server import MockModelServer

USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "id": "u"}]


async def pydsh_pass(svc: LlmService, calls: int) -> tuple[float, int]:
    """Seconds for ``calls`` streamed calls through the adapter, normaliser and block assembly."""
    chunks = 0
    start = time.perf_counter()
    for _ in range(calls):
        acc, asm = AssistantStreamAccumulator(), BlockAssembler()
        async for chunk in svc.stream({"provider": "deepseek-official", "model": "m", "messages": USER}):
            acc.add(chunk, 0)
            asm.add(chunk)
            chunks += 1
    return time.perf_counter() - start, chunks


async def floor_pass(client: httpx.AsyncClient, url: str, calls: int) -> tuple[float, int]:
    """Seconds for the same streams read with httpx + httpx-sse + ``json.loads`` alone."""
    body = {"model": "m", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-api-key": "bench", "anthropic-version": "2023-06-01"}
    events = 0
    start = time.perf_counter()
    for _ in range(calls):
        async with client.stream("POST", url, json=body, headers=headers) as response:
            async for event in httpx_sse.EventSource(response).aiter_sse():
                json.loads(event.data)
                events += 1
    return time.perf_counter() - start, events


async def main(calls: int, rounds: int = 9) -> None:
    os.environ.setdefault("DEEPSEEK_API_KEY", "bench")
    text = "word " * 400
    async with MockModelServer(["success"], repeat_last=True, successText=text, chunkSize=4) as server:
        k = Kernel()
        svc = LlmService(k.ctx)
        adapter = DeepSeekAdapter(Config(), base_url=server.base_url)
        svc.register_adapter(k.ctx, ["deepseek-official"], adapter)
        ours_runs: list[float] = []
        floor_runs: list[float] = []
        async with httpx.AsyncClient() as client:
            for _ in range(rounds):
                ours, chunks = await pydsh_pass(svc, calls)
                floor, events = await floor_pass(client, server.base_url + "/v1/messages", calls)
                ours_runs.append(ours)
                floor_runs.append(floor)
        await adapter.aclose()
    overheads = [(o - f) / events * 1e6 for o, f in zip(ours_runs, floor_runs, strict=True)]
    best = (min(ours_runs) - min(floor_runs)) / events * 1e6
    print(f"calls={calls} chunks={chunks} events={events} last round: pydsh={ours:.3f}s floor={floor:.3f}s")
    print(
        f"per_call={ours / calls * 1000:.2f}ms per_chunk={ours / chunks * 1e6:.1f}us (mock server in the same process)"
    )
    print(
        f"overhead above httpx + httpx-sse + json.loads: median {statistics.median(overheads):.1f}us per SSE event "
        f"over {rounds} interleaved rounds, {best:.1f}us between the fastest rounds (target <= 10us)"
    )


def long_answer(deltas: int = 10_000, size: int = 1024) -> None:
    """Fold one answer of ``deltas`` text deltas into its block and print the time."""
    piece = "x" * size
    start = time.perf_counter()
    asm = BlockAssembler()
    for _ in range(deltas):
        asm.add({"type": "text-delta", "index": 0, "text": piece})
    text = asm.content()[0]["text"]
    elapsed = time.perf_counter() - start
    print(f"long answer: {deltas} deltas of {size} B ({len(text) / 1e6:.1f} MB) folded in {elapsed * 1000:.1f} ms")
    start = time.perf_counter()
    translator = MessagesTranslator("m")
    translator.feed({"type": "message_start", "message": {"usage": {"input_tokens": 1}}})
    translator.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
    for _ in range(deltas):
        translator.feed(delta)
    text = translator.blocks[0].assembled()["text"]
    elapsed = time.perf_counter() - start
    print(f"long answer: the same {len(text) / 1e6:.1f} MB read by the DeepSeek translator in {elapsed * 1000:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
    long_answer()
