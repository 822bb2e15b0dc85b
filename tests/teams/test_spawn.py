"""Spawn, names and limits (spec 08 §A.11 #1–#3)."""

from __future__ import annotations

from pathlib import Path

from pydsh.session.keys import SESSION_QUERY
from tests.agent.harness import start_host
from tests.subagents.helpers import calls, deleg, of_type
from tests.teams.helpers import TEAMS, codes, quiesce, spawn, team_records, values


async def test_01_lead_spawns_grader(tmp_path: Path) -> None:
    host = await start_host([[calls(spawn()), {"text": "spawned"}], [{"text": "graded"}]], patches=(TEAMS,))
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        member = values(lead.session)[0]["member"]
        assert {k: member[k] for k in ("target", "role", "context", "provider", "diagnostics")} == {
            "target": "grader",
            "role": "teammate",
            "context": "fresh",
            "provider": "spawn",
            "diagnostics": [],
        }
        assert member["status"] in ("running", "inactive")
        records = team_records(lead.session)
        assert [r["member"]["phase"] for r in records] == ["provisioning", "active"]
        assert all(r["version"] == 2 and r["teamId"] == lead.id for r in records)
        child_id = records[0]["member"]["id"]
        catalog = of_type(lead.session, "subagent/catalog")
        assert catalog[0]["data"]["name"] == "grader" and catalog[0]["data"]["version"] == 3
        assert child_id not in str(values(lead.session)[0])
        child = (await host.kernel.ctx.require(SESSION_QUERY).read_session(child_id))["events"]
        descriptor = next(e["data"] for e in child if e["type"] == "subagent/descriptor")
        assert descriptor["mode"] == "continuable"
    finally:
        await host.close()


async def test_02_teammate_cannot_spawn_and_names_are_checked(tmp_path: Path) -> None:
    bad = [spawn("Grader"), spawn("9lives"), spawn("lead"), spawn("a" * 33)]
    host = await start_host(
        [
            [calls(*bad, spawn()), {"text": "spawned"}] + [{"text": "ack"}] * 3,
            [calls(spawn("helper")), {"text": "cannot"}],
        ],
        patches=(TEAMS,),
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        assert codes(lead.session)[:4] == ["TEAM_INVALID_MEMBER_NAME"] * 4
        assert values(lead.session)[0] == (
            "Error: teammate name must be lower-kebab-case, start with a letter, have at most 32 characters, "
            'and not be "lead"'
        )
        child_id = team_records(lead.session)[0]["member"]["id"]
        child = host.kernel.ctx.require(SESSION_QUERY)
        events = (await child.read_session(child_id))["events"]
        result = next(e["data"] for e in events if e["type"] == "tool/result")
        assert result["error"]["code"] == "TEAM_LEAD_REQUIRED"
        assert result["message"]["content"][0]["text"] == "Error: only the Team Lead can create teammates"
    finally:
        await host.close()


async def test_03_names_are_never_reused_and_the_roster_is_bounded(tmp_path: Path) -> None:
    no_depth = [{"id": "subagent", "config": {"maxDepth": 0}}]
    failing = [spawn(f"m{i}") for i in range(1, 17)]
    script = [
        calls(spawn("grader"), spawn("grader"), *failing[1:], spawn("extra")),
        {"text": "done"},
    ]
    host = await start_host([script], patches=(TEAMS, no_depth))
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        got = values(lead.session)
        assert got[0] == "Error: subagent depth 1 exceeds maxDepth 0"
        assert got[1] == 'Error: teammate name "grader" was already used in this Team'
        assert codes(lead.session)[1] == "TEAM_MEMBER_NAME_TAKEN"
        assert got[-1] == "Error: Team member limit 16 reached"
        assert codes(lead.session)[-1] == "TEAM_MEMBER_LIMIT"
        phases = [r["member"]["phase"] for r in team_records(lead.session)]
        assert phases.count("failed") == 16
    finally:
        await host.close()


async def test_03_plain_subagent_names_and_roster_names_share_one_namespace(tmp_path: Path) -> None:
    script = [
        calls(deleg("help", name="helper")),
        calls(spawn("helper")),
        calls(spawn()),
        calls(deleg("again", name="grader")),
        {"text": "done"},
    ] + [{"text": "ack"}] * 4
    host = await start_host([script, [{"text": "helped"}], [{"text": "graded"}]], patches=(TEAMS,))
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        got = values(lead.session)
        assert got[1] == 'Error: name "helper" is already used by a subagent of the Team Lead'
        assert codes(lead.session)[1] == "TEAM_MEMBER_NAME_TAKEN"
        assert codes(lead.session)[3] == "DUPLICATE_AGENT_NAME"
    finally:
        await host.close()


async def test_fork_context_inherits_completed_lead_turns(tmp_path: Path) -> None:
    host = await start_host(
        [
            [{"text": "noted"}, calls(spawn(context="fork")), {"text": "spawned"}] + [{"text": "ack"}] * 2,
            [{"text": "x"}],
        ],
        patches=(TEAMS,),
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "remember 42")
        await host.run(lead, "now fork")
        await quiesce(host)
        member = values(lead.session)[0]["member"]
        assert (member["context"], member["provider"]) == ("fork", "fork")
        child_id = team_records(lead.session)[0]["member"]["id"]
        events = (await host.kernel.ctx.require(SESSION_QUERY).read_session(child_id))["events"]
        texts = [
            b.get("text")
            for e in events
            if e["type"] == "user/message"
            for b in e["data"]["content"]
            if isinstance(b, dict)
        ]
        assert "remember 42" in texts
    finally:
        await host.close()
