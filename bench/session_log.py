"""Session log benchmark: append+flush throughput and cold read of a 10,000-event log.

Run: python bench/session_log.py [--events 10000]
Prints events/s for appends (committed, published, batched and fsynced) and the time to
cold-read a stored log (parse, validate, rebuild the session, derive the model history).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from pydsh.kernel import Kernel
from pydsh.session.events import make_header
from pydsh.session.log import SessionStore
from pydsh.session.persistence.jsonl import JsonlPersistence


def turn_events(turn: int) -> list[tuple[str, Any, dict[str, Any]]]:
    """One realistic tool-using turn: 10 events with messages, a stream record and a tool pair."""
    call = f"call_{turn}"
    text = "Reading the file and checking what it does. " * 4
    stream = [
        {"type": "chunk", "time": 1, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}},
        {"type": "text-chunks", "time0": 1, "index": 0, "dt": [0] * 19, "texts": ["word "] * 20},
        {
            "type": "chunk",
            "time": 2,
            "chunk": {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        },
        {"type": "chunk", "time": 2, "chunk": {"type": "finish", "reason": {"kind": "tool-calls"}}},
    ]
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": text},
            {"type": "tool-call", "id": call, "name": "read", "arguments": '{"file_path":"a.py"}'},
        ],
        "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"},
        "id": f"a{turn}",
    }
    result = {
        "role": "tool",
        "source": {"kind": "tool", "callId": call},
        "toolCallId": call,
        "content": [{"type": "text", "text": "<path>/w/a.py</path>\n" + "1: x = 1\n" * 30}],
        "isError": False,
        "id": f"r{turn}",
    }
    user = {
        "content": [{"type": "text", "text": f"task {turn}"}],
        "source": {"kind": "user"},
        "role": "user",
        "id": f"u{turn}",
    }
    usage = {"inputTokens": 900, "outputTokens": 20, "totalTokens": 920}
    return [
        ("turn/start", {"turn": turn}, {}),
        ("step/start", {"turn": turn, "step": 1}, {}),
        ("user/message", user, {"surface_op": "append"}),
        (
            "assistant/message",
            {"turn": turn, "step": 1, "message": assistant, "usage": usage, "stream": stream},
            {"surface_op": "append"},
        ),
        (
            "tool/call",
            {"turn": turn, "step": 1, "callId": call, "name": "read", "arguments": '{"file_path":"a.py"}'},
            {},
        ),
        (
            "tool/result",
            {"turn": turn, "step": 1, "message": result},
            {"surface_op": "append", "source_event_seqs": None},
        ),
        ("step/end", {"turn": turn, "step": 1}, {}),
        ("step/start", {"turn": turn, "step": 2}, {}),
        ("step/end", {"turn": turn, "step": 2}, {}),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}),
    ]


async def main(n_events: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="pydsh-bench-"))
    kernel = Kernel()
    store = SessionStore(kernel.ctx)
    persistence = JsonlPersistence(root)
    session = store.new(make_header("bench", 1, cwd="/w"))
    handle = await persistence.create(session.header)
    session.publish = lambda s, e: handle.append([e])

    started = time.perf_counter()
    turn = 0
    while len(session.events) < n_events:
        turn += 1
        for etype, data, kw in turn_events(turn):
            if etype == "tool/result":
                kw = {"surface_op": "append", "source_event_seqs": [session.seq]}
            session.append(etype, data, **kw)
        if turn % 10 == 0:
            await handle.flush()
    await handle.close()
    elapsed = time.perf_counter() - started
    count = len(session.events)
    size = sum(p.stat().st_size for p in root.rglob("*.jsonl"))
    print(
        f"append+flush: {count} events in {elapsed:.3f} s = {count / elapsed:,.0f} events/s "
        f"(flush barrier every 100 events, {size / 1e6:.1f} MB on disk)"
    )

    timings = []
    for _ in range(5):
        fresh = JsonlPersistence(root)
        t0 = time.perf_counter()
        read = await fresh.open("bench", "read")
        events = await read.read()
        rebuilt = SessionStore(kernel.ctx).new(read.header, events)
        messages = rebuilt.derive_messages()
        timings.append(time.perf_counter() - t0)
    timings.sort()
    print(
        f"cold read of {len(events)} events (parse, validate, rebuild, derive {len(messages)} messages): "
        f"median {timings[2] * 1000:.0f} ms, min {timings[0] * 1000:.0f} ms (target < 500 ms)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    asyncio.run(main(parser.parse_args().events))
