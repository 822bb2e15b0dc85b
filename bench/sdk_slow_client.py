"""SDK server memory under a slow client: server RSS while a long turn streams to a reader that lags.

Run: python bench/sdk_slow_client.py [--deltas 10000] [--delta-bytes 256] [--blocks 100] [--stall-s 5] [--read-kib-per-s 1024]
Spawns ``python -m pydsh.sdk`` with a patch whose model (this file's ``streaming_model`` plugin)
answers with ``--deltas`` text deltas generated on the fly, as fast as they are pulled. The client
opts into live deltas (one ``pydsh.session.delta`` notification per delta), runs a short warm-up
turn, then prompts once, reads nothing for ``--stall-s`` seconds and then reads stdout at a fixed,
slow rate. It prints the server's VmRSS over
time and its peak over the RSS after the warm-up. A server that buffers every unread frame grows
with the turn; one that applies back-pressure stays flat apart from the turn's own text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from pydsh.llm.hooks import LLM_STREAM

SESSION = "slow"
BLOCKS = [{"type": "text", "text": "Stream a long answer."}]


# -- the model, loaded into the server by the patch -----------------------------------------------


def streaming_model(ctx: Any, config: None) -> None:
    """Serves every model call: ``Warm.`` for the warm-up session, else the long reply of the env sizes."""
    deltas = int(os.environ.get("PYDSH_BENCH_DELTAS", "10000"))
    size = int(os.environ.get("PYDSH_BENCH_DELTA_BYTES", "256"))
    blocks = int(os.environ.get("PYDSH_BENCH_BLOCKS", "100"))

    async def serve(options: dict[str, Any], nxt: Callable[[], Awaitable[Any]]) -> AsyncIterator[dict[str, Any]]:
        if options.get("sessionId") != SESSION:
            return reply(["Warm."], 1, 1)
        return reply([chr(ord("a") + i) * size for i in range(26)], deltas, blocks)

    ctx.on(LLM_STREAM, serve)


async def reply(pieces: list[str], deltas: int, blocks: int) -> AsyncIterator[dict[str, Any]]:
    """``blocks`` text blocks holding ``deltas`` deltas in all, cycling through ``pieces``, generated lazily.

    Several blocks keep each block's text short: the server appends every delta to its block."""
    per_block = max(1, deltas // blocks)
    for index in range(blocks):
        yield {"type": "block-start", "index": index, "blockType": "text"}
        for i in range(per_block):
            yield {"type": "text-delta", "index": index, "text": pieces[i % len(pieces)]}
        text = "".join(pieces[i % len(pieces)] for i in range(per_block))
        yield {"type": "block-end", "index": index, "block": {"type": "text", "text": text}}
    yield {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": deltas, "totalTokens": 0}}
    yield {"type": "finish", "reason": {"kind": "stop"}}


# -- the slow client ------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` in MB (NaN once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def request(rid: str, method: str, params: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode()


async def read_until_idle(stdout: asyncio.StreamReader, session: str, rate: int | None, counts: dict[str, int]) -> None:
    """Read stdout (``rate`` bytes per second in 20 small reads, or as fast as possible) until ``session``
    goes idle; counts frames by method and bytes read."""
    tail = b""
    while True:
        data = await stdout.read(max(1, rate // 20) if rate else 1 << 20)
        if not data:
            raise SystemExit("server closed stdout before the turn ended")
        counts["bytes"] = counts.get("bytes", 0) + len(data)
        lines = (tail + data).split(b"\n")
        tail = lines.pop()
        for line in lines:
            frame = json.loads(line)
            method = frame.get("method", "response")
            counts[method] = counts.get(method, 0) + 1
            if method == "session.status" and frame["params"] == {"sessionId": session, "status": "idle"}:
                return
        if rate:
            await asyncio.sleep(0.05)


async def sample(pid: int, every: float, out: list[tuple[float, float]], started: float) -> None:
    while True:
        out.append((time.monotonic() - started, rss_mb(pid)))
        await asyncio.sleep(every)


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-sdk-") as scratch:
        patch = Path(scratch) / "model.yml"
        patch.write_text(json.dumps([{"insert": [{"id": "bench-model", "name": "sdk_slow_client:streaming_model"}]}]))
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(Path(__file__).parent)) if p)
        env = {**os.environ, "PYTHONPATH": path, "DSH_HOME": str(Path(scratch) / "home")}
        env |= {"DEEPSEEK_API_KEY": "sk-unused", "PYDSH_BENCH_DELTAS": str(args.deltas)}
        env |= {"PYDSH_BENCH_DELTA_BYTES": str(args.delta_bytes), "PYDSH_BENCH_BLOCKS": str(args.blocks)}
        argv = [sys.executable, "-m", "pydsh.sdk", "--patch", str(patch)]
        proc = await asyncio.create_subprocess_exec(*argv, stdin=-1, stdout=-1, stderr=-3, env=env, cwd=scratch)
        assert proc.stdin is not None and proc.stdout is not None
        init = {"cwd": scratch, "provider": "deepseek-official", "model": "deepseek-v4-flash"}
        proc.stdin.write(request("init", "initialize", init | {"pydshExtensions": {"deltas": True}}))
        proc.stdin.write(request("w", "session/prompt", {"sessionId": "warm-up", "contentBlocks": BLOCKS}))
        await read_until_idle(proc.stdout, "warm-up", None, {})
        baseline = rss_mb(proc.pid)
        samples: list[tuple[float, float]] = []
        counts: dict[str, int] = {}
        started = time.monotonic()
        sampler = asyncio.ensure_future(sample(proc.pid, args.sample_s, samples, started))
        proc.stdin.write(request("p", "session/prompt", {"sessionId": SESSION, "contentBlocks": BLOCKS}))
        await asyncio.sleep(args.stall_s)
        await read_until_idle(proc.stdout, SESSION, args.read_kib_per_s * 1024, counts)
        elapsed = time.monotonic() - started
        sampler.cancel()
        proc.stdin.write(request("bye", "shutdown", {}))
        proc.stdin.close()
        await proc.stdout.read()
        await proc.wait()
    notes = f"{counts.get('pydsh.session.delta', 0)} delta + {counts.get('session.event', 0)} event notifications"
    print(f"turn: {notes}; the client read {counts['bytes'] / 1e6:.1f} MB in {elapsed:.1f} s")
    print(f"RSS after initialize and a warm-up turn: {baseline:.1f} MB")
    print("server RSS over time (s: MB):")
    step = max(1, len(samples) // 16)
    print("  " + "  ".join(f"{t:.1f}: {mb:.1f}" for t, mb in samples[::step]))
    peak = max(mb for _, mb in samples)
    print(f"peak RSS: {peak:.1f} MB (+{peak - baseline:.1f} MB over the warm-up)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--delta-bytes", type=int, default=256)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--stall-s", type=float, default=5.0, help="seconds the client reads nothing after prompting")
    parser.add_argument("--read-kib-per-s", type=int, default=1024)
    parser.add_argument("--sample-s", type=float, default=0.25)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
