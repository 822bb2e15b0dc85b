"""list_agents, wait_agent and interrupt_agent (spec 08 §A.11 #11–#12)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydsh.teams.keys import AGENT_TEAMS
from pydsh.teams.service import NO_PROGRESS
from tests.agent.harness import start_host
from tests.messaging.test_control_tools import add_wait_tool
from tests.subagents.helpers import calls, tool
from tests.teams.helpers import (
    TEAMS,
    codes,
    quiesce,
    spawn,
    team_records,
    teammates_answer_after_the_leads_first_turn,
    values,
)

EXACT_NO_PROGRESS = (
    "No other Team member is running or provisioning. wait_agent cannot make progress or wake inactive teammates. "
    "Re-list with list_agents and team_task_list, then use send_message to wake each required inactive teammate "
    "before waiting again."
)


async def test_11_wait_without_an_active_peer_returns_no_progress(tmp_path: Path) -> None:
    script = [
        calls(spawn()),
        {"text": "waiting"},
        calls(tool("list_agents"), tool("wait_agent"), tool("wait_agent", timeout_ms=5000)),
        {"text": "done"},
    ] + [{"text": "ack"}] * 2
    host = await start_host([script, [{"text": "graded"}]], patches=(TEAMS,))
    lead = (await host.create(tmp_path)).agent
    teammates_answer_after_the_leads_first_turn(host, lead)
    try:
        await host.run(lead, "go")
        await quiesce(host)
        got = values(lead.session)
        roster = got[1]
        assert [r["target"] for r in roster] == ["lead", "grader"]
        assert roster[0]["role"] == "lead" and roster[0]["diagnostics"] == []
        assert roster[1]["status"] == "inactive"
        assert got[2] == {"timedOut": False, "noProgress": {"reason": "no-active-peer", "message": EXACT_NO_PROGRESS}}
        assert NO_PROGRESS == EXACT_NO_PROGRESS
        assert got[3] == "Error: timeoutMs must be an integer from 10000 through 3600000"
        assert codes(lead.session)[3] == "TEAM_INVALID_TIMEOUT"
    finally:
        await host.close()


async def test_11_wait_wakes_on_a_team_change(tmp_path: Path) -> None:
    script = [calls(spawn()), calls(tool("wait_agent")), {"text": "done"}] + [{"text": "ack"}] * 3
    grader = [
        calls(tool("wait_until")),
        calls(tool("team_task_create", subject="found", description="a finding")),
        {"text": "graded"},
    ]
    host = await start_host([script, grader], patches=(TEAMS,))
    teams = host.kernel.ctx.require(AGENT_TEAMS)
    add_wait_tool(host, lambda: any(teams._waiters.values()))
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        assert values(lead.session)[1] == {"timedOut": False}
    finally:
        await host.close()


async def test_12_lead_interrupts_a_running_teammate_keeping_its_inbox(tmp_path: Path) -> None:
    teams_ref: dict[str, Any] = {}

    def grader_running() -> bool:
        lead_agent = teams_ref.get("lead")
        if lead_agent is None:
            return False
        members = teams_ref["teams"].state(lead_agent).members.values()
        live = [host.agents.get(m.id) for m in members]
        return any(a is not None and a.status == "running" for a in live)

    script = [
        calls(spawn()),
        calls(tool("wait_until")),
        calls(
            tool("send_message", target="grader", message="later"),
            tool("interrupt_agent", target="grader"),
            tool("interrupt_agent", target="lead"),
            tool("interrupt_agent", target="nobody"),
        ),
        {"text": "done"},
    ] + [{"text": "ack"}] * 3
    host = await start_host([script, [{"kind": "hang"}]], patches=(TEAMS,))
    teams_ref["teams"] = host.kernel.ctx.require(AGENT_TEAMS)
    add_wait_tool(host, grader_running)
    lead = (await host.create(tmp_path)).agent
    teams_ref["lead"] = lead
    try:
        await host.run(lead, "go")
        got = values(lead.session)
        assert got[1] == "ready"
        assert got[3] == {"previousStatus": "running"}
        assert got[4] == "Error: the Team Lead cannot interrupt itself"
        assert codes(lead.session)[4:6] == ["TEAM_INVALID_TARGET", "TEAM_MEMBER_NOT_FOUND"]
        grader = host.agents.get(team_records(lead.session)[0]["member"]["id"])
        assert grader is not None
        for _ in range(300):
            if any(e["type"] == "turn/end" for e in grader.session.events):
                break
            await asyncio.sleep(0.01)
        ends = [e["data"]["reason"]["kind"] for e in grader.session.events if e["type"] == "turn/end"]
        assert ends == ["aborted"]
        assert grader.inbox.has_pending
    finally:
        await host.close()
