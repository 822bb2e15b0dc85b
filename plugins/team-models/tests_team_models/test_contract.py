"""R1: the plugin's calls into the ``agent_teams`` service, against the real service (public API only)."""

from __future__ import annotations

from pydsh.contract.tools import TOOLS, ToolError, ToolExec
from pydsh.kernel.cancel import NEVER
from pydsh.teams.errors import TeamError
from pydsh.teams.keys import AGENT_TEAMS
from pydsh.teams.service import AgentTeams, Membership
from tests_team_models.world import world


async def test_the_team_service_calls_the_plugin_makes() -> None:
    async with world(members=("grader",)) as w:
        teams: AgentTeams = w.ctx.require(AGENT_TEAMS)
        lead = teams.membership(w.lead.live)
        assert isinstance(lead, Membership)
        assert (lead.role, lead.name, lead.team_id, lead.lead) == ("lead", "lead", w.lead.session_id, w.lead.live)
        members = list(teams.sound_state(lead.lead).members.values())
        assert [(m.name, m.phase, m.id) for m in members] == [("grader", "active", w.member_id("grader"))]
        async with w.holding("grader") as grader:
            found = teams.try_membership(grader)
            assert found is not None and (found.role, found.name, found.team_id) == ("teammate", "grader", lead.team_id)
        other = await w.host.create_agent(provider="provider-a", model="model-a")
        assert teams.try_membership(other.live) is not None
        assert teams.try_membership(None) is None
        try:
            teams.membership(type("Stranger", (), {"id": "nobody"})())
        except TeamError as exc:
            assert (exc.code, exc.message) == (
                "TEAM_NOT_MEMBER",
                'agent "nobody" is not a member of an active Agent Team',
            )
        else:
            raise AssertionError("a stranger was a member")


async def test_a_call_without_an_agent_is_refused() -> None:
    async with world(members=()) as w:
        definition = w.ctx.require(TOOLS).lookup(w.lead.live, "team_model_list")
        exec = ToolExec(
            call_id="c1",
            name="team_model_list",
            raw_arguments="{}",
            arguments={},
            agent=None,
            session=None,
            turn=None,
            step=None,
            signal=NEVER,
            scope=None,
        )
        try:
            await definition.execute({}, exec)
        except ToolError as exc:
            assert exc.message == "team_model_list requires a calling Agent"
        else:
            raise AssertionError("a call without an agent ran")
