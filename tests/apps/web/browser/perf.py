"""What the speed tests and ``bench/web_open.py`` share: the page probe (long tasks, the moment a turn's end
is painted), the heavy scripts (a 1,500-tool-call turn, a 5 MB answer) and a long session written straight
to disk, so a 10,000-event log costs about a second to seed instead of half a minute of agent turns."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydsh.session.persistence.jsonl import ZSTD, JsonlPersistence, encode_line, log_text
from pydsh.testing.hosts import ScriptedHost

PROBE = """
(() => {
  // Installed before the page's code: the longest main-thread task since arm(), and when a finished turn
  // (its end row shown, no answer still streaming) was first seen in a frame.
  const probe = { since: 0, longest: 0, finished: null, armed: false };
  new PerformanceObserver((list) => {
    for (const task of list.getEntries()) {
      if (task.startTime >= probe.since) probe.longest = Math.max(probe.longest, task.duration);
    }
  }).observe({ type: "longtask", buffered: true });
  const watch = () => {
    if (probe.armed && probe.finished === null && document.querySelector("#conversation .turn-end")
        && !document.querySelector("#conversation .streaming")) probe.finished = performance.now();
    requestAnimationFrame(watch);
  };
  requestAnimationFrame(watch);
  probe.arm = () => Object.assign(probe, { since: performance.now(), longest: 0, finished: null, armed: true });
  window.__perf = probe;
})();
"""
"""Init script: a ``longtask`` PerformanceObserver and a per-frame watch for the turn's end."""

TOOL_CALLS = 1500
PER_STEP = 50
ANSWER_BYTES = 5 * 1024 * 1024


def tool_turn(calls: int = TOOL_CALLS, per_step: int = PER_STEP) -> list[dict[str, Any]]:
    """One turn of ``calls`` ``read`` calls, ``per_step`` in parallel per step, then a short answer."""
    read = {"name": "read", "arguments": {"file_path": "hello.txt"}}
    steps = [{"tool_calls": [read] * per_step} for _ in range(calls // per_step)]
    return [*steps, {"text": "All files read."}]


def markdown_answer(size: int = ANSWER_BYTES) -> str:
    """About ``size`` bytes of the Markdown a model writes: headings, paragraphs, lists and fenced code."""
    section = (
        "## Step {n}\n\nThe change touches **three** modules; see `pydsh/web.py` and "
        "[the spec](https://example.com/spec). Each one keeps its *own* state.\n\n"
        "- read the log once\n- fold the events\n- render the view\n\n"
        "```python\ndef step_{n}(events):\n    return [e for e in events if e['seq'] > {n}]\n```\n\n"
    )
    parts: list[str] = []
    total = 0
    n = 0
    while total < size:
        piece = section.replace("{n}", str(n))
        parts.append(piece)
        total += len(piece)
        n += 1
    return "".join(parts)


def streamed_answer(text: str, chunk: int = 1024) -> dict[str, Any]:
    """A scripted model call streaming ``text`` in ``chunk``-character deltas."""
    deltas = [{"type": "text-delta", "index": 0, "text": text[i : i + chunk]} for i in range(0, len(text), chunk)]
    return {
        "chunks": [
            {"type": "block-start", "index": 0, "blockType": "text"},
            *deltas,
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
            {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": len(text) // 4, "totalTokens": 10}},
            {"type": "finish", "reason": {"kind": "stop"}},
        ]
    }


class Probe:
    """The page side of a measurement: arm before acting, then read what the page saw."""

    def __init__(self, page: Any) -> None:
        self.page = page

    def arm(self) -> None:
        self.page.evaluate("window.__perf.arm()")

    def longest_task_ms(self) -> float:
        return float(self.page.evaluate("window.__perf.longest"))

    def wait_finished(self, timeout: float = 120.0) -> float:
        """Epoch seconds at which the page first showed the finished turn (its clock mapped onto ours)."""
        self.page.wait_for_function("() => window.__perf.finished !== null", timeout=timeout * 1000, polling=100)
        before = time.time()
        finished, now = self.page.evaluate("[window.__perf.finished, performance.now()]")
        after = time.time()
        return (before + after) / 2 - (float(now) - float(finished)) / 1000


def turn_end_time(events: list[dict[str, Any]]) -> float:
    """Epoch seconds of the last ``turn/end`` the server logged."""
    return float(next(e["time"] for e in reversed(events) if e["type"] == "turn/end")) / 1000


# -- a long session written straight to disk -----------------------------------------------------------

READS = {"tool_calls": [{"name": "read", "arguments": {"file_path": "hello.txt"}}]}
SEED_WINDOW = [
    {
        "id": "deepseek-official",
        "name": "DeepSeek (scripted)",
        "models": [{"id": "deepseek-v4-flash", "contextWindow": 100_000_000}],
    }
]
"""A window no seeded session reaches, so the two real turns never compact."""
CALL_ID = re.compile(r"^call-\d+-(\d+)$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


async def _two_turns(home: Path, workspace: Path) -> str:
    """Run two real turns (nine ``read`` calls and an answer each); the session's id."""
    script = ([READS] * 9 + [{"text": "done"}]) * 2
    async with ScriptedHost(script, profile="web", cwd=workspace, dsh_home=home, providers=SEED_WINDOW) as host:
        agent = await host.create_agent()
        for _ in range(2):
            await agent.run("Read hello.txt nine times, then say done.")
        session_id = agent.session_id
        await agent.close()
    return session_id


def _renumbered(value: Any, turn: int, ids: dict[str, str]) -> Any:
    """A copy of an event's payload for another turn: its turn number, fresh call and message ids."""
    if isinstance(value, dict):
        return {k: (turn if k == "turn" else _renumbered(v, turn, ids)) for k, v in value.items()}
    if isinstance(value, list):
        return [_renumbered(v, turn, ids) for v in value]
    if isinstance(value, str) and (CALL_ID.match(value) or UUID.match(value)):
        return ids.setdefault(value, f"call-t{turn}-{len(ids)}" if value.startswith("call-") else str(uuid.uuid4()))
    return value


def seed_long_session(home: Path, workspace: Path, events: int) -> tuple[str, int]:
    """A stored root session of at least ``events`` events, written as the web profile writes logs (zstd
    frames); its last turn (real, then copied with new seqs, turn numbers and ids) repeats to the length, and
    the times move back so the log ends when it was written, as a real one does."""
    with ThreadPoolExecutor(1) as worker:  # Playwright's loop may be running in this thread
        session_id = worker.submit(asyncio.run, _two_turns(home, workspace)).result()
    [path] = list(home.glob(f"sessions/*/{session_id}/{ZSTD}"))
    lines = log_text(path.read_bytes(), path, True).decode().splitlines()
    header, log = lines[0], [json.loads(line) for line in lines[1:]]
    first_end = next(i for i, e in enumerate(log) if e["type"] == "turn/end")
    turn = log[first_end + 1 :]
    step_ms = turn[-1]["time"] - turn[0]["time"] + 1
    n = 2
    while len(log) < events:
        n += 1
        ids: dict[str, str] = {}
        for e in turn:
            copy = {**e, "seq": len(log), "time": e["time"] + (n - 2) * step_ms}
            copy["data"] = _renumbered(e["data"], n, ids)
            log.append(copy)
    late = log[-1]["time"] - turn[-1]["time"]
    for e in log:
        e["time"] -= late
    head = json.loads(header)
    head["createdAt"] -= late
    store = JsonlPersistence(path.parent.parent.parent, compression="zstd")
    frames = [store.frame(json.dumps(head, separators=(",", ":")).encode() + b"\n", True)]
    for start in range(0, len(log), 200):
        frames.append(store.frame(b"".join(encode_line(e) for e in log[start : start + 200]), True))
    path.write_bytes(b"".join(frames))
    return session_id, len(log)
