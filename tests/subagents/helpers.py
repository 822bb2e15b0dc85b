"""Shared helpers for the subagent and messaging acceptance tests."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydsh.llm.hooks import LLM_STREAM
from pydsh.session.hooks import SESSION_CREATED
from pydsh.session.log import Session
from pydsh.subagents.keys import SUBAGENTS
from tests.agent.harness import Host


def deleg(description: str = "task", prompt: str = "p", **extra: Any) -> dict[str, Any]:
    return {"name": "subagent", "arguments": {"description": description, "prompt": prompt, **extra}}


def tool(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def calls(*items: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(items)}


def bind_in_creation_order(host: Host) -> None:
    """Hold a child session's first model call until every earlier-created child has made its own.

    The scripted model binds sessions to scripts in first-call order (spec 04 §8.6), so concurrently
    running siblings would otherwise claim scripts in whatever order the scheduler picks.
    """
    bound: dict[str, asyncio.Event] = {}

    def created(session: Session) -> None:
        if session.header.get("parentSession"):
            bound[session.id] = asyncio.Event()

    async def in_order(options: Mapping[str, Any], nxt: Callable[[], Awaitable[Any]]) -> Any:
        mine = bound.get(options.get("sessionId") or "")
        if mine is None or mine.is_set() or options.get("purpose") == "session-title":
            return await nxt()
        for earlier in itertools.takewhile(lambda event: event is not mine, list(bound.values())):
            await earlier.wait()
        stream = await nxt()
        mine.set()
        return stream

    host.kernel.ctx.on(SESSION_CREATED, created)
    host.kernel.ctx.on(LLM_STREAM, in_order, before=LLM_STREAM.order)


async def quiesce(host: Host, timeout: float = 10.0) -> None:
    """Wait until every agent is idle and every activation has settled."""
    service = host.kernel.ctx.require(SUBAGENTS)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        busy = [a for a in host.agents.all() if a.status != "idle"]
        settling = [a for a in service.activations.values() if a.settling is not None]
        if not busy and not settling and all(not a.agent.inbox.has_pending for a in service.activations.values()):
            await asyncio.sleep(0.02)
            if not [a for a in host.agents.all() if a.status != "idle"]:
                return
        await asyncio.sleep(0.01)
    raise AssertionError("agents did not quiesce")


def results(session: Session) -> list[dict[str, Any]]:
    return [e["data"] for e in session.events if e["type"] == "tool/result"]


def result_texts(session: Session) -> list[str]:
    return ["".join(b["text"] for b in r["message"]["content"]) for r in results(session)]


def of_type(session: Session, event_type: str) -> list[dict[str, Any]]:
    return [e for e in session.events if e["type"] == event_type]
