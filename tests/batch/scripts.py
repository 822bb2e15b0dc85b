"""Scripted model answers for batch tests: each task follows its own plan on one loopback mock server.

A request's task is the ``[task ID]`` tag of its prompt and its step the number of assistant messages
it carries, so a resumed task picks up its plan where its log left off.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

TAG = re.compile(r"\[task ([A-Za-z0-9._-]+)\]")
WRITE_DONE = {"tool_calls": [{"name": "write", "arguments": {"file_path": "done.txt", "content": "ok\n"}}]}
PASS = [WRITE_DONE, {"text": "Wrote done.txt."}]
"""Writes the file the check looks for, then answers."""
FAIL = [{"text": "I could not do it."}]
"""Answers without writing the file: the check fails."""
STALL = ["stall"]
"""Holds the response open: the task runs out of time."""
CHECK = "test -f done.txt"


def texts(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content or () if isinstance(b, dict))


def task_and_step(body: dict[str, Any]) -> tuple[str, int]:
    """The task a request belongs to and how many of its steps the history already holds."""
    messages = body.get("messages", [])
    found = next((m for msg in messages if msg.get("role") == "user" and (m := TAG.search(texts(msg)))), None)
    assert found is not None, f"a request without a task tag: {json.dumps(body)[:300]}"
    return found.group(1), sum(1 for m in messages if m.get("role") == "assistant")


class Scripts:
    """Per-task plans, ``rate_limited`` tasks' first calls refused with 429, and a record of every call."""

    def __init__(self, plans: dict[str, list[Any]], rate_limited: dict[str, int] | None = None) -> None:
        self.plans = plans
        self.rate_limited = dict(rate_limited or {})
        self.calls: list[tuple[float, str, int, str]] = []
        """``(arrival, task, step, behaviour)`` of each request."""
        self.held: set[str] = set()
        """Tasks whose second call waits until ``release`` is set."""
        self.waiting: list[str] = []
        self.release = asyncio.Event()

    def choose(self, body: dict[str, Any]) -> Any:
        task, step = task_and_step(body)
        if self.rate_limited.get(task, 0) > 0:
            self.rate_limited[task] -= 1
            behaviour: Any = "rate_limit"
        else:
            plan = self.plans[task]
            behaviour = plan[min(step, len(plan) - 1)]
        self.calls.append((time.time(), task, step, behaviour if isinstance(behaviour, str) else "scripted"))
        return behaviour

    async def hold(self, body: dict[str, Any]) -> None:
        task, step = task_and_step(body)
        if task in self.held and step == 1:
            self.waiting.append(task)
            await self.release.wait()

    def tasks_called(self) -> set[str]:
        return {task for _, task, _, _ in self.calls}


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def task(task_id: str, **extra: Any) -> dict[str, Any]:
    """A task whose prompt carries its tag and whose check looks for ``done.txt``."""
    return {"id": task_id, "prompt": f"[task {task_id}] write done.txt", "check": CHECK, **extra}


def results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def fifty_tasks(directory: Path, scripts: Scripts) -> Path:
    """The issue's batch: 50 scripted tasks (every fifth fails its check, t07 runs out of time, t13 is
    refused with 429 twice, t10 copies a workspace, t11 runs a setup command) and three bad ones (a
    malformed line, a missing workspace, a failing setup command)."""
    source = directory / "project"
    source.mkdir()
    (source / "README").write_text("the project\n")
    ids = [f"t{i:02d}" for i in range(50)]
    scripts.plans = {i: FAIL if n % 5 == 4 else PASS for n, i in enumerate(ids)}
    scripts.plans["t07"] = STALL
    scripts.rate_limited["t13"] = 2
    tasks = [task(i) for i in ids]
    tasks[7]["timeout"] = 1
    tasks[10] |= {"workspace": "project", "check": "test -f done.txt && test -f README"}
    tasks[11] |= {"setup": "echo ready > setup.txt", "check": "test -f done.txt && test -f setup.txt"}
    lines = "".join(json.dumps(t) + "\n" for t in tasks)
    lines += "{not json\n"
    lines += '{"id": "gone", "prompt": "[task gone] x", "workspace": "no-such-dir"}\n'
    lines += '{"id": "badsetup", "prompt": "[task badsetup] x", "setup": "echo broken >&2; exit 4"}\n'
    path = directory / "tasks.jsonl"
    path.write_text(lines)
    return path


def check_fifty(records: list[dict[str, Any]], scripts: Scripts) -> None:
    """The results of :func:`fifty_tasks`: complete, one line each, every outcome as scripted."""
    by_id = {r["id"]: r for r in records}
    assert len(records) == len(by_id) == 53
    ids = [f"t{i:02d}" for i in range(50)]
    failing = {i for n, i in enumerate(ids) if n % 5 == 4}
    assert {i for i, r in by_id.items() if r["passed"]} == set(ids) - failing - {"t07"}
    assert {by_id[i]["check"] for i in failing} == {"failed"}
    assert all(by_id[i]["status"] == "completed" for i in ids if i != "t07")
    t07 = by_id["t07"]
    assert (t07["status"], t07["finishReason"], t07["check"]) == ("timeout", "aborted", "failed")
    assert [b for _, t, _, b in scripts.calls if t == "t13"][:2] == ["rate_limit", "rate_limit"]
    assert by_id["t13"]["passed"] and by_id["t13"]["tokens"]["totalTokens"] > 0
    assert by_id["t10"]["passed"] and by_id["t11"]["passed"]
    assert by_id["line-51"]["status"] == "invalid" and "tasks.jsonl:51: not valid JSON" in by_id["line-51"]["error"]
    assert by_id["gone"]["status"] == "error" and by_id["gone"]["error"].endswith("no-such-dir does not exist")
    assert by_id["badsetup"]["error"] == "setup command 'echo broken >&2; exit 4' failed (exit 4): broken"
    assert all("\n" not in r.get("error", "") for r in records)
    first = by_id["t00"]
    assert first["finalAnswer"] == "Wrote done.txt." and first["route"] == "deepseek-official/deepseek-v4-flash"
