"""The public embedding API joins the roster's preset when its profile composes one (spec 10 §1.7)."""

from __future__ import annotations

from pathlib import Path

import pydsh.testing

ROSTER = [{"insert": [{"id": "presets", "name": "pydsh:include", "config": {"bundle": "presets"}}]}]


async def test_embedded_agents_of_a_roster_profile_join_the_default_preset(tmp_path: Path) -> None:
    async with pydsh.testing.scripted_host([{"text": "done"}], cwd=tmp_path, patches=(ROSTER,)) as host:
        agent = await host.create_agent()
        result = await agent.run("hi")
        assert result.final_response == "done"
        header = agent.live.session.header
        assert header["agentPreset"] == "standard"
        roster = host.ctx.require("agent_presets")
        assert roster.composed_preset(agent.live.ctx) == "standard"
