"""The remaining error codes of spec 08 §A.10: not a member, disposing, provisioning conflict, aborted wait."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pydsh.kernel.cancel import AbortController
from pydsh.teams import service as team_service
from pydsh.teams.errors import TeamError
from pydsh.teams.keys import AGENT_TEAMS
from tests.agent.harness import start_host
from tests.messaging.test_control_tools import add_wait_tool
from tests.subagents.helpers import calls, deleg, tool
from tests.teams.helpers import TEAMS, codes, quiesce, spawn, team_records, values


async def test_a_plain_subagent_is_not_a_member(tmp_path: Path) -> None:
    host = await start_host(
        [[calls(deleg("help")), {"text": "ok"}] + [{"text": "ack"}] * 2, [{"kind": "hang"}]], patches=(TEAMS,)
    )
    teams = host.kernel.ctx.require(AGENT_TEAMS)
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        child = next(a for a in host.agents.all() if a is not lead)
        with pytest.raises(TeamError) as caught:
            teams.membership(child)
        assert caught.value.code == "TEAM_NOT_MEMBER"
        assert caught.value.message == f'agent "{child.id}" is not a member of an active Agent Team'
    finally:
        await host.close()


async def test_spawn_while_disposing_is_refused(tmp_path: Path) -> None:
    host = await start_host([[calls(spawn()), {"text": "no"}]], patches=(TEAMS,))
    host.kernel.ctx.require(AGENT_TEAMS).disposing = True
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        assert values(lead.session)[0] == "Error: Agent Teams service is disposing"
        assert codes(lead.session)[0] == "TEAM_DISPOSED"
        assert team_records(lead.session) == []
    finally:
        await host.close()


async def test_a_prompt_not_durably_accepted_fails_the_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(team_service, "prompt_accepted", lambda events: False)
    host = await start_host(
        [[calls(spawn(), spawn()), {"text": "failed"}] + [{"text": "ack"}] * 2, [{"kind": "hang"}]], patches=(TEAMS,)
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        assert values(lead.session)[0] == 'Error: teammate "grader" initial prompt was not durably accepted'
        assert codes(lead.session) == ["TEAM_PROVISIONING_CONFLICT", "TEAM_MEMBER_NAME_TAKEN"]
        records = [r["member"] for r in team_records(lead.session)]
        assert [r["phase"] for r in records] == ["provisioning", "failed"]
        assert records[1]["error"] == 'teammate "grader" initial prompt was not durably accepted'
        assert host.agents.get(records[0]["id"]) is None
    finally:
        await host.close()


async def test_an_aborted_wait_is_team_wait_aborted(tmp_path: Path) -> None:
    script = [calls(spawn()), calls(tool("wait_until")), {"text": "done"}] + [{"text": "ack"}] * 3
    host = await start_host([script, [{"kind": "hang"}]], patches=(TEAMS,))
    teams = host.kernel.ctx.require(AGENT_TEAMS)

    def grader_running() -> bool:
        return any(a.status == "running" for a in host.agents.all() if a.session.header.get("parentSession"))

    add_wait_tool(host, grader_running)
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        controller = AbortController()
        waiting = asyncio.ensure_future(teams.wait(lead, {}, controller.signal))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        controller.abort({"kind": "user"})
        with pytest.raises(TeamError) as caught:
            await waiting
        assert caught.value.code == "TEAM_WAIT_ABORTED"
        assert caught.value.message == "wait_agent aborted: user"
    finally:
        await host.close()
