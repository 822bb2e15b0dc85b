"""Compaction benchmark: deriving the model view of a 10,000-event session before and after compaction.

Run: python bench/compaction.py
A session of tool-calling turns (11 events each, about 10,000 events) is appended to a live
agent's log in process; then the real engine compacts it from idle (``compact_now``, the
summary served in process). For each state: a cold derive (rebuild the ``Session`` from the event
list, as a resume does, then ``derive_messages``) with its time and peak allocation, a warm
``derive_messages``, and the token meter's cost per step (one appended message, then ``measure``).
The meter's 100-message figure is ``bench/meter.py``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydsh.compaction.keys import COMPACTION  # noqa: E402
from pydsh.compaction.meter import TokenMeter  # noqa: E402
from pydsh.contract.agent import AgentOptions, user_message  # noqa: E402
from pydsh.session.log import Session  # noqa: E402
from tests.compaction.helpers import compaction_host  # noqa: E402

EVENTS = 10_000
USAGE = {"inputTokens": 900, "outputTokens": 40}
MODEL = {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}


def ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1000:.3f} ms, p95 {sorted(samples)[int(len(samples) * 0.95)] * 1000:.3f} ms"


def append_turn(session: Session, turn: int) -> None:
    """One turn: a prompt, a step with one tool call and its result, a step with the answer."""
    session.append("turn/start", {"turn": turn})
    session.append("user/message", user_message(f"look at file {turn} " * 8), surface_op="append")
    session.append("step/start", {"turn": turn, "step": 1})
    call = {"type": "tool-call", "id": f"c{turn}", "name": "read", "arguments": json.dumps({"file_path": f"{turn}.py"})}
    message = {"role": "assistant", "id": f"a{turn}", "content": [call], "source": MODEL}
    session.append(
        "assistant/message",
        {"turn": turn, "step": 1, "message": message, "stream": [], "usage": USAGE},
        surface_op="append",
    )
    session.append(
        "tool/call", {"turn": turn, "step": 1, "callId": f"c{turn}", "name": "read", "arguments": call["arguments"]}
    )
    result = {
        "role": "tool",
        "id": f"r{turn}",
        "toolCallId": f"c{turn}",
        "source": {"kind": "tool", "callId": f"c{turn}"},
        "content": [{"type": "text", "text": f"line of file {turn}\n" * 30}],
    }
    session.append("tool/result", {"turn": turn, "step": 1, "message": result}, surface_op="append")
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("step/start", {"turn": turn, "step": 2})
    text = {"type": "text", "text": f"file {turn} is fine " * 6}
    answer = {"role": "assistant", "id": f"b{turn}", "content": [text], "source": MODEL}
    session.append(
        "assistant/message",
        {"turn": turn, "step": 2, "message": answer, "stream": [], "usage": USAGE},
        surface_op="append",
    )
    session.append("step/end", {"turn": turn, "step": 2})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def derive_figures(session: Session) -> dict[str, Any]:
    """Cold rebuild + derive (time, peak memory), warm derive, and the meter's per-step cost."""
    events = [dict(e) for e in session.events]
    cold: list[float] = []
    for _ in range(5):
        t0 = time.perf_counter()
        Session(session.header, events).derive_messages()
        cold.append(time.perf_counter() - t0)
    tracemalloc.start()
    rebuilt = Session(session.header, events)
    view = rebuilt.derive_messages()
    _size, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    warm: list[float] = []
    for _ in range(200):
        t0 = time.perf_counter()
        session.derive_messages()
        warm.append(time.perf_counter() - t0)
    meter = TokenMeter()
    meter.measure(session)
    step: list[float] = []
    for i in range(200):
        session.append("user/message", user_message(f"steer {i}"), surface_op="append")
        t0 = time.perf_counter()
        meter.measure(session)
        step.append(time.perf_counter() - t0)
    return {
        "events": len(events),
        "messages": len(view),
        "view_bytes": len(json.dumps(view, ensure_ascii=False)),
        "cold": cold,
        "peak": peak,
        "warm": warm,
        "step": step,
        "tokens": meter.measure(session).total_tokens,
    }


def report(label: str, f: dict[str, Any]) -> None:
    print(
        f"{label}: {f['events']} events, view {f['messages']} messages / {f['view_bytes'] / 1e6:.2f} MB JSON, ~{f['tokens']} tokens"
    )
    print(f"  cold rebuild + derive:  {ms(f['cold'])}, peak {f['peak'] / 1e6:.1f} MB allocated")
    print(f"  warm derive_messages:   {ms(f['warm'])}")
    print(f"  meter per step:         {ms(f['step'])}")


async def main() -> None:
    host, _summariser = await compaction_host([], window=10_000_000)
    with tempfile.TemporaryDirectory() as cwd:
        route = AgentOptions(provider="deepseek-official", model="deepseek-v4-flash")
        handle = await host.create(Path(cwd), agent_options=route)
        agent = handle.agent
        session = agent.session
        turn = 0
        while len(session.events) + 11 <= EVENTS:
            turn += 1
            append_turn(session, turn)
        before = derive_figures(session)
        t0 = time.perf_counter()
        await host.kernel.ctx.require(COMPACTION).compact_now(agent, None)
        took = time.perf_counter() - t0
        after = derive_figures(session)
        await handle.dispose()
    await host.close()
    report("before compaction", before)
    print(f"compact_now (summary served in process, flush included): {took * 1000:.1f} ms")
    report("after compaction", after)


if __name__ == "__main__":
    asyncio.run(main())
