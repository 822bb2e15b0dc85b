"""The floor under a read step's CPU: what any harness built on pydsh's libraries does per step, without one.

Run: python bench/step_floor.py [--at 50,200]
A child process does, per step, only what the SDK server cannot avoid on the same stack and the same
loopback mock: append and fsync the log at the three flush barriers of a step (spec 02 §9.6) in a
worker thread; send the request (the encoded system prompt and tools, then every message, each encoded
once) through httpx; read its SSE stream through httpx-sse and parse each event; read the file the step
reads in a worker thread; write the step's five session events to a pipe as JSON-RPC frames. Printed:
the child's CPU time per step (all its threads), median around each step count. ``bench/batch.py``
prints it beside pydsh's own figure; the difference is what the harness itself costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydsh.testing.mock_model_server import MockModelServer  # noqa: E402

WINDOW = 10
"""Steps either side of a count whose median is reported (``bench/batch.py`` uses the same window)."""
READ = {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]}
HEADERS = {"content-type": "application/json", "accept": "text/event-stream", "x-api-key": "sk-bench"}


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def prefix() -> str:
    """A request's start, encoded once: model, a system prompt and twelve tool schemas of pydsh's sizes."""
    schema = {"type": "object", "properties": {"file_path": {"type": "string", "description": "A path. " * 8}}}
    tools = [
        {"name": f"tool_{n}", "description": "What the tool does. " * 40, "input_schema": schema} for n in range(12)
    ]
    head = {"model": "deepseek-v4", "max_tokens": 32000, "stream": True, "system": "Guidance. " * 900, "tools": tools}
    return compact(head)[:-1]


async def steps(url: str, count: int, directory: str) -> list[float]:
    """``count`` read steps; the CPU each took, in ms."""
    import httpx
    from httpx_sse import aconnect_sse

    log = os.open(os.path.join(directory, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    out = os.open(os.devnull, os.O_WRONLY)
    path = os.path.join(directory, "a.txt")
    Path(path).write_text("alpha\nbeta\n")

    def durable(line: bytes) -> None:
        os.write(log, line)
        os.fsync(log)

    def frame(event: object) -> None:
        os.write(
            out, (compact({"jsonrpc": "2.0", "method": "session.event", "params": {"event": event}}) + "\n").encode()
        )

    head = prefix()
    encoded = [compact({"role": "user", "content": [{"type": "text", "text": "Read a.txt again and again."}]})]
    costs = []
    async with httpx.AsyncClient(timeout=60) as client:
        for step in range(count):
            started = cpu_s()
            await asyncio.to_thread(durable, b"x" * 400)  # the step boundary's barrier
            body = head + ',"messages":[' + ",".join(encoded) + "]}"
            await asyncio.to_thread(durable, b"x" * 400)  # the barrier before the model call
            events = []
            async with aconnect_sse(client, "POST", url, content=body.encode(), headers=HEADERS) as source:
                async for sse in source.aiter_sse():
                    events.append(json.loads(sse.data))
            call = {"type": "tool_use", "id": f"call_{step}", "name": "read", "input": {"file_path": "a.txt"}}
            message = {"role": "assistant", "content": [call]}
            frame(message)
            await asyncio.to_thread(durable, b"x" * 400)  # the barrier before the tool body
            text = await asyncio.to_thread(Path(path).read_text)
            result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": text}]}
            for _ in range(4):
                frame(result)
            encoded += [compact(message), compact(result)]
            costs.append((cpu_s() - started) * 1000)
    return costs


def always_read(body: dict[str, Any]) -> Any:
    return READ


async def floor(at: list[int]) -> list[float]:
    """The child's median CPU per step around each count in ``at``."""
    count = max(at) + WINDOW
    with tempfile.TemporaryDirectory(prefix="pydsh-bench-floor-") as tmp:
        async with MockModelServer(choose=always_read, chunkDelayMs=0) as server:
            child = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--child", server.base_url + "/v1/messages", str(count), tmp,
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            output, _ = await child.communicate()
    if child.returncode != 0:
        raise SystemExit(f"the floor's child failed (exit {child.returncode})")
    costs = json.loads(output)
    return [statistics.median(costs[n - WINDOW : n + WINDOW]) for n in at]


def report(at: list[int], medians: list[float]) -> str:
    figures = ", ".join(f"{m:.1f} ms at {n}" for n, m in zip(at, medians, strict=True))
    return f"floor     CPU per read step of the libraries alone, no harness (median of steps n-{WINDOW}..n+{WINDOW - 1}): {figures}"


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        url, count, directory = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        print(json.dumps(asyncio.run(steps(url, count, directory))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--at", default="50,200", help="step counts to report CPU at")
    at = [int(n) for n in parser.parse_args().at.split(",")]
    print(report(at, asyncio.run(floor(at))))


if __name__ == "__main__":
    main()
