"""Session log benchmark: append+flush throughput, cold read and cold resume of a 10,000-event log.

Run: python bench/session_log.py [--events 10000] [--runs 5] [--encoding plain|zstd|both]
The session is realistic: tool-using turns with stream records, and every fourth turn starts
with a ``request/header`` carrying the full default tool schemas (what a resume logs), captured
from a scripted run. Prints events/s for appends (committed, published, batched and fsynced),
the time to cold-read the stored log (parse, validate, rebuild, derive the model history) and the
time ``Host.resume_agent`` takes on it (lock, read, repair, rebuild, every resume-time fold of the
default profile): medians of interleaved runs, wall and CPU (all threads).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pydsh.host import Host
from pydsh.kernel import Kernel
from pydsh.session.events import make_header, thaw
from pydsh.session.log import SessionStore
from pydsh.session.persistence.jsonl import JsonlPersistence
from pydsh.testing.hosts import scripted_host

HEADER_EVERY = 4
"""A ``request/header`` with the full tool schemas every fourth turn, like a session resumed that often."""


async def real_request_header(home: Path, workspace: Path) -> dict[str, Any]:
    """The ``request/header`` data logged for a first request (the default tool schemas included)."""
    async with scripted_host([{"text": "ok"}], dsh_home=home, cwd=workspace) as host:
        agent = await host.create_agent()
        await agent.run("hello")
        header = next(e for e in agent.events if e["type"] == "request/header")
        await agent.close()
    data: dict[str, Any] = thaw(header["data"])
    return data


def turn_events(turn: int, header: dict[str, Any] | None) -> list[tuple[str, Any, dict[str, Any]]]:
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
    headed: list[tuple[str, Any, dict[str, Any]]] = (
        [("request/header", {**header, "reason": "resume"}, {})] if header is not None else []
    )
    return [
        ("turn/start", {"turn": turn}, {}),
        ("user/message", user, {"surface_op": "append"}),
        ("step/start", {"turn": turn, "step": 1}, {}),
        *headed,
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
        ("tool/result", {"turn": turn, "step": 1, "message": result}, {"surface_op": "append"}),
        ("step/end", {"turn": turn, "step": 1}, {}),
        ("step/start", {"turn": turn, "step": 2}, {}),
        ("step/end", {"turn": turn, "step": 2}, {}),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}),
    ]


async def write_session(root: Path, encoding: str, cwd: str, header: dict[str, Any], n: int) -> str:
    """Append ``n`` events to a session named after ``encoding`` through the store, with a flush
    barrier every 10 turns; report throughput and size on disk."""
    kernel = Kernel()
    persistence = JsonlPersistence(root, compression="zstd" if encoding == "zstd" else "none")
    session = SessionStore(kernel.ctx).new(make_header(encoding, 1, cwd=cwd))
    handle = await persistence.create(session.header)
    session.publish = lambda s, e: handle.append([e])
    started = time.perf_counter()
    turn = 0
    while len(session.events) < n:
        turn += 1
        for etype, data, kw in turn_events(turn, header if turn % HEADER_EVERY == 1 else None):
            if etype == "tool/result":
                kw = {**kw, "source_event_seqs": [session.seq]}
            session.append(etype, data, **kw)
        if turn % 10 == 0:
            await handle.flush()
    await handle.close()
    elapsed = time.perf_counter() - started
    size = handle.path.stat().st_size
    count = len(session.events)
    return (
        f"append+flush ({encoding}): {count} events in {elapsed:.3f} s = {count / elapsed:,.0f} events/s "
        f"(flush barrier every ~100 events, {size / 1e6:.2f} MB on disk)"
    )


class Clock:
    """Wall time and CPU time (all threads of this process) since it started, in seconds."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


async def cold_read(root: Path, session_id: str) -> tuple[tuple[float, float], int, int]:
    """Open read-only, parse, validate, rebuild and derive the model history; times, events, messages."""
    kernel = Kernel()
    clock = Clock()
    read = await JsonlPersistence(root).open(session_id, "read")
    events = await read.read()
    rebuilt = SessionStore(kernel.ctx).new(read.header, events)
    messages = rebuilt.derive_messages()
    return clock.stop(), len(events), len(messages)


async def cold_resume(home: Path, workspace: Path, session_id: str) -> tuple[float, float]:
    """``Host.resume_agent`` (host start excluded), closed without writing a turn."""
    async with Host(dsh_home=home, cwd=workspace) as host:
        clock = Clock()
        agent = await host.resume_agent(session_id)
        agent.live.session.derive_messages()
        elapsed = clock.stop()
        await agent.close()
    return elapsed


def summary(times: list[tuple[float, float]]) -> str:
    """Median and minimum wall time, and median CPU time, in milliseconds."""
    walls = [wall * 1000 for wall, _cpu in times]
    cpu = statistics.median(cpu * 1000 for _wall, cpu in times)
    return f"median {statistics.median(walls):.0f} ms (min {min(walls):.0f}, CPU {cpu:.0f})"


async def main(n_events: int, runs: int, encodings: list[str]) -> None:
    base = Path(tempfile.mkdtemp(prefix="pydsh-bench-"))
    workspace = base / "w"
    workspace.mkdir()
    header = await real_request_header(base / "capture", workspace)
    home = base / "home"
    for encoding in encodings:
        print(await write_session(home / "sessions", encoding, str(workspace), header, n_events))
    reads: dict[str, list[tuple[float, float]]] = {e: [] for e in encodings}
    resumes: dict[str, list[tuple[float, float]]] = {e: [] for e in encodings}
    shape = (0, 0)
    for _ in range(runs):
        for encoding in encodings:
            times, count, messages = await cold_read(home / "sessions", encoding)
            reads[encoding].append(times)
            shape = (count, messages)
            resumes[encoding].append(await cold_resume(home, workspace, encoding))
    for encoding in encodings:
        print(
            f"{encoding:5}: cold read of {shape[0]} events (parse, validate, rebuild, derive {shape[1]} messages) "
            f"{summary(reads[encoding])}; cold resume_agent {summary(resumes[encoding])} (target <= 200 ms)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--encoding", choices=("plain", "zstd", "both"), default="both")
    args = parser.parse_args()
    asyncio.run(main(args.events, args.runs, ["plain", "zstd"] if args.encoding == "both" else [args.encoding]))
