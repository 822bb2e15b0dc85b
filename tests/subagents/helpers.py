"""Shared helpers for the subagent and messaging acceptance tests."""

from __future__ import annotations

import asyncio
from typing import Any

from pydsh.session.log import Session
from tests.agent.harness import Host


def deleg(description: str = "task", prompt: str = "p", **extra: Any) -> dict[str, Any]:
    return {"name": "subagent", "arguments": {"description": description, "prompt": prompt, **extra}}


def tool(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def calls(*items: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(items)}


async def quiesce(host: Host, timeout: float = 10.0) -> None:
    """Wait until every agent is idle and every activation has settled."""
    service = host.kernel.ctx.require("subagents")
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
