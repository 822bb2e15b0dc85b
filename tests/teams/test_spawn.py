"""Spawn, names and limits (spec 08 §A.11 #1–#3)."""

from __future__ import annotations

from pathlib import Path

from tests.agent.harness import start_host
from tests.subagents.helpers import calls, of_type, quiesce
from tests.teams.helpers import TEAMS, spawn, team_records, values


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
        child = (await host.kernel.ctx.require("session_query").read_session(child_id))["events"]
        descriptor = next(e["data"] for e in child if e["type"] == "subagent/descriptor")
        assert descriptor["mode"] == "continuable"
    finally:
        await host.close()
