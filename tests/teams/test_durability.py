"""Recovery, forks, corrupt state and identity texts (spec 08 §A.11 #13–#16)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from pydsh.session.keys import SESSION_QUERY, SESSIONS
from pydsh.session.log import Session
from pydsh.teams.keys import AGENT_TEAMS
from pydsh.teams.tools import LEAD_IDENTITY, policy
from tests.agent.harness import start_host
from tests.messaging.test_control_tools import snapshot_sections
from tests.subagents.helpers import calls, tool
from tests.teams.helpers import TEAMS, codes, quiesce, spawn, team_records, values

TEAMMATE_IDENTITY = (
    'You are teammate "grader".\n'
    'Your Team Lead is named "lead".\n'
    'To message your Team Lead, use send_message({ target: "lead", message: "..." }).\n'
    "Use list_agents({}) to find your teammates and their names.\n"
    'To message another teammate, use send_message({ target: "<teammate name>", message: "..." }).'
)


def member_record(team_id: str, member_id: str, name: str, phase: str = "provisioning") -> dict[str, Any]:
    member = {"id": member_id, "name": name, "description": "d", "provider": "spawn", "context": "fresh"}
    return {"version": 2, "teamId": team_id, "member": {**member, "phase": phase}}


async def test_13_crash_between_provisioning_and_active_is_reconciled_from_the_child_log(tmp_path: Path) -> None:
    host = await start_host(
        [[calls(spawn()), {"text": "spawned"}] + [{"text": "ack"}] * 3, [{"text": "graded"}]], patches=(TEAMS,)
    )
    teams = host.kernel.ctx.require(AGENT_TEAMS)
    record = teams._member_record

    async def crash_before_active(lead: Any, member: Any) -> None:
        if member.phase != "active":
            await record(lead, member)

    teams._member_record = crash_before_active
    lead = (await host.create(tmp_path)).agent
    lead_id = lead.id
    try:
        await host.run(lead, "go")
        await quiesce(host)
        ghost = str(uuid.uuid4())
        lead.session.append("team/member", member_record(lead_id, ghost, "ghost"))
        assert [r["member"]["phase"] for r in team_records(lead.session)] == ["provisioning", "provisioning"]
    finally:
        await host.close()

    again = await start_host([[calls(tool("list_agents")), {"text": "listed"}]], patches=(TEAMS,))
    try:
        lead = (await again.agents.resume(lead_id)).agent
        phases = {r["member"]["name"]: r["member"]["phase"] for r in team_records(lead.session)}
        assert phases == {"grader": "active", "ghost": "failed"}
        await again.run(lead, "list")
        rows = values(lead.session)[-1]
        assert [(r["target"], r["status"]) for r in rows] == [
            ("lead", "running"),
            ("grader", "inactive"),
            ("ghost", "failed"),
        ]
        assert rows[2]["diagnostics"] == ['teammate "ghost" was never created']
    finally:
        await again.close()


async def test_14_an_ordinary_fork_of_the_lead_leads_its_own_team(tmp_path: Path) -> None:
    host = await start_host(
        [
            [calls(spawn()), {"text": "spawned"}] + [{"text": "ack"}] * 3,
            [{"text": "graded"}],
            [calls(tool("list_agents")), {"text": "alone"}],
        ],
        patches=(TEAMS,),
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        store = host.kernel.ctx.require(SESSIONS)
        last_end = max(e["seq"] for e in lead.session.events if e["type"] == "turn/end")
        prefix = store.fork_prefix(lead.session, last_end)
        fork = (await host.create(tmp_path, prefix_events=prefix, inherited_event_count=last_end + 1)).agent
        await host.run(fork, "who is here")
        rows = values(fork.session)[-1]
        assert [r["target"] for r in rows] == ["lead"]
    finally:
        await host.close()


async def test_15_a_reused_name_makes_the_team_state_corrupt(tmp_path: Path) -> None:
    host = await start_host(
        [[calls(tool("list_agents"), tool("team_task_list")), {"text": "broken"}]], patches=(TEAMS,)
    )
    lead = (await host.create(tmp_path)).agent
    try:
        lead.session.append("team/member", member_record(lead.id, str(uuid.uuid4()), "grader"))
        lead.session.append("team/member", member_record(lead.id, str(uuid.uuid4()), "grader"))
        await host.run(lead, "go")
        message = 'Error: Agent Teams state is corrupt: teammate name "grader" is reused by another member'
        assert values(lead.session) == [message, message]
        assert codes(lead.session) == ["TEAM_STATE_CORRUPT"] * 2
    finally:
        await host.close()


async def test_16_identity_and_policy_texts(tmp_path: Path) -> None:
    host = await start_host(
        [[calls(spawn()), {"text": "spawned"}] + [{"text": "ack"}] * 3, [{"text": "graded"}]], patches=(TEAMS,)
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        lead_sections = {s["name"]: s["text"] for s in snapshot_sections(lead.session)}
        assert lead_sections["team:identity"] == LEAD_IDENTITY
        assert "subagent:identity" not in lead_sections
        prompt = lead.session.derive_messages()[0]
        assert prompt["role"] == "system" and policy(True) in prompt["content"][0]["text"]
        assert "send_message and interrupt_agent, or as owner" in policy(True)
        child_id = team_records(lead.session)[0]["member"]["id"]
        read = await host.kernel.ctx.require(SESSION_QUERY).read_session(child_id)
        child = Session(read["session"], read["events"])
        child_sections = {s["name"]: s["text"] for s in snapshot_sections(child)}
        assert child_sections["team:identity"] == TEAMMATE_IDENTITY
        assert "subagent:identity" not in child_sections
        first = next(m for m in child.derive_messages() if m["role"] == "user")
        assert [b["text"] for b in first["content"]] == ["grade the work"]
    finally:
        await host.close()
