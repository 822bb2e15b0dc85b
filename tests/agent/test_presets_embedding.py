"""The public embedding API joins the roster's preset when its profile composes one (spec 10 §1.7)."""

from __future__ import annotations

from pathlib import Path

import pytest

import pydsh.testing
from pydsh.agent.keys import AGENT_PRESETS

ROSTER = [{"insert": [{"id": "presets", "name": "pydsh:include", "config": {"bundle": "presets"}}]}]


async def test_embedded_agents_of_a_roster_profile_join_the_default_preset(tmp_path: Path) -> None:
    async with pydsh.testing.scripted_host([{"text": "done"}], cwd=tmp_path, patches=(ROSTER,)) as host:
        agent = await host.create_agent()
        result = await agent.run("hi")
        assert result.final_response == "done"
        header = agent.live.session.header
        assert header["agentPreset"] == "standard"
        roster = host.ctx.require(AGENT_PRESETS)
        assert roster.composed_preset(agent.live.ctx) == "standard"


async def test_create_agent_joins_the_named_preset_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    script = [{"text": "done"}]
    async with pydsh.testing.scripted_host(script, cwd=tmp_path, patches=(ROSTER,)) as host:
        with pytest.raises(pydsh.HostError, match="Unknown agent preset: nope"):
            await host.create_agent(preset="nope")
        agent = await host.create_agent(preset="minimal")
        assert (await agent.run("hi")).final_response == "done"
        assert agent.live.session.header["agentPreset"] == "minimal"
        roster = host.ctx.require(AGENT_PRESETS)
        assert roster.composed_preset(agent.live.ctx) == "minimal"
