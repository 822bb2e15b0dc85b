"""Shipped disabled, enabled by a patch; limits checked; plain subagents are not members (spec 08 §A.1–§A.3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pydsh.agent.hooks import AGENT_CREATED
from pydsh.contract.tools import TOOLS
from pydsh.teams.errors import TeamError
from pydsh.teams.keys import AGENT_TEAMS
from pydsh.teams.service import Config, limits
from tests.agent.harness import compose, start_host
from tests.subagents.helpers import calls, deleg
from tests.teams.helpers import TEAMS, quiesce


def test_base_ships_both_rows_disabled() -> None:
    rows = {row.id: row for row in compose(["base"], []).rows}
    assert rows["agent-teams"].disabled is True and rows["tool-agent-team"].disabled is True
    enabled = {row.id: row for row in compose(["base"], [TEAMS]).rows}
    assert enabled["agent-teams"].disabled is False and enabled["tool-agent-team"].disabled is False


@pytest.mark.parametrize("value", [0, -1, 1.5, "3", True, 2**53])
def test_a_bad_limit_is_team_invalid_config(value: object) -> None:
    with pytest.raises(TeamError) as caught:
        limits(Config(maxTasks=value))
    assert caught.value.code == "TEAM_INVALID_CONFIG"
    assert caught.value.message == "maxTasks must be a positive safe integer"


async def test_without_the_patch_no_team_tools(tmp_path: Path) -> None:
    host = await start_host([[{"text": "hi"}]])
    lead = (await host.create(tmp_path)).agent
    try:
        tools = host.kernel.ctx.require(TOOLS)
        assert tools.lookup(lead, "spawn_teammate") is None
        assert host.kernel.ctx.get(AGENT_TEAMS) is None
    finally:
        await host.close()


async def test_members_see_team_tools_and_plain_subagents_keep_the_global_ones(tmp_path: Path) -> None:
    host = await start_host(
        [[calls(deleg("help")), {"text": "ok"}] + [{"text": "ack"}] * 2, [{"text": "x"}]], patches=(TEAMS,)
    )
    seen: dict[str, object] = {}
    tools = host.kernel.ctx.require(TOOLS)
    teams = host.kernel.ctx.require(AGENT_TEAMS)

    async def created(payload: dict[str, object]) -> None:
        agent = payload["agent"]
        seen[agent.id] = (tools.lookup(agent, "spawn_teammate"), teams.try_membership(agent))  # type: ignore[attr-defined]

    host.kernel.ctx.on(AGENT_CREATED, created)
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        assert tools.lookup(lead, "spawn_teammate") is not None
        assert teams.membership(lead).role == "lead"
        child = next(v for k, v in seen.items() if k != lead.id)
        assert child == (None, None)
        assert tools.lookup(lead, "send_message") is not tools.lookup(None, "send_message")
    finally:
        await host.close()
