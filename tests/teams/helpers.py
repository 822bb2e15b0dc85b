"""Shared helpers for the Agent Teams acceptance tests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydsh.llm.hooks import LLM_STREAM
from pydsh.session.log import Session
from pydsh.subagents.keys import SUBAGENTS
from tests.agent.harness import Host
from tests.subagents.helpers import results

TEAMS = [{"id": "agent-teams", "disabled": False}, {"id": "tool-agent-team", "disabled": False}]


def spawn(
    name: str = "grader", description: str = "grade", prompt: str = "grade the work", **extra: Any
) -> dict[str, Any]:
    return {
        "name": "spawn_teammate",
        "arguments": {"name": name, "description": description, "prompt": prompt, **extra},
    }


def values(session: Session) -> list[Any]:
    """Each tool result's value: the parsed JSON, or the ``Error: …`` text."""
    out: list[Any] = []
    for result in results(session):
        text = "".join(b["text"] for b in result["message"]["content"])
        out.append(json.loads(text) if text[:1] in "{[" else text)
    return out


def codes(session: Session) -> list[str | None]:
    return [(r.get("error") or {}).get("code") for r in results(session)]


def team_records(session: Session, event_type: str = "team/member") -> list[dict[str, Any]]:
    return [e["data"] for e in session.events if e["type"] == event_type]


async def quiesce(host: Host, timeout: float = 20.0) -> None:
    """Wait until no agent works or holds pending input and every activation settled (twice in a row)."""
    service = host.kernel.ctx.require(SUBAGENTS)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    calm = 0
    while loop.time() < deadline:
        agents = host.agents.all()
        busy = any(a.status != "idle" or a.inbox.has_pending for a in agents)
        settling = any(a.settling is not None for a in service.activations.values())
        calm = 0 if busy or settling else calm + 1
        if calm >= 3:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("agents did not quiesce")


def teammates_answer_after_the_leads_first_turn(host: Host, lead: Any) -> None:
    """Hold every other session's model call until ``lead``'s first turn ended, so a teammate's settlement
    starts the Lead's next turn (finishing sooner, it would ride along in the first turn's next step, and
    the Lead would follow a different script)."""

    async def hold(options: dict[str, Any], nxt: Any) -> Any:
        while options["sessionId"] != lead.id and not any(e["type"] == "turn/end" for e in lead.session.events):
            await asyncio.sleep(0.01)
        return await nxt()

    host.kernel.ctx.on(LLM_STREAM, hold, before=LLM_STREAM.order)
