"""Throughput of the model layer: mock → DeepSeek adapter → service normaliser → records/assembly.

Run: python bench/llm_stream.py [calls]

Also times folding one long answer (10,000 text deltas of 1 KiB) into content blocks, which must
stay linear in the answer's length.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from pydsh.kernel import Kernel
from pydsh.llm.deepseek import Config, DeepSeekAdapter
from pydsh.llm.service import LlmService
from pydsh.llm.stream_records import AssistantStreamAccumulator, BlockAssembler
from pydsh.testing.mock_model_server import MockModelServer

USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "id": "u"}]


async def main(calls: int) -> None:
    os.environ.setdefault("DEEPSEEK_API_KEY", "bench")
    text = "word " * 400
    async with MockModelServer(["success"], repeat_last=True, successText=text, chunkSize=4) as server:
        k = Kernel()
        svc = LlmService(k.ctx)
        adapter = DeepSeekAdapter(Config(), base_url=server.base_url)
        svc.register_adapter(k.ctx, ["deepseek-official"], adapter)
        chunks = 0
        start = time.perf_counter()
        for _ in range(calls):
            acc, asm = AssistantStreamAccumulator(), BlockAssembler()
            async for chunk in svc.stream({"provider": "deepseek-official", "model": "m", "messages": USER}):
                acc.add(chunk, 0)
                asm.add(chunk)
                chunks += 1
        elapsed = time.perf_counter() - start
        await adapter.aclose()
    print(f"calls={calls} chunks={chunks} total={elapsed:.3f}s per_call={elapsed / calls * 1000:.2f}ms")
    print(f"per_chunk={elapsed / chunks * 1e6:.1f}us (mock server in the same process)")


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


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
    long_answer()
