"""The invariants of spec 08 §B.9 and the precedence table of §B.6.

I1 is also ``test_acceptance.test_01``, I4 ``test_07`` and I5 ``test_03`` (end to end); here each is
asserted on its own.
"""

from __future__ import annotations

from typing import Any

from pydsh_team_models.plugin import precedence
from pydsh_team_models.state import TeamEntry

from pydsh.plugin import Route
from tests_team_models.world import headers, notices, world

P = Route("p", "m", "high")
D = Route("pd", "md")
C = Route("pc", "mc", "low")
A = {"provider": "provider-a", "model": "model-a"}
B = {"provider": "provider-b", "model": "model-b"}


def test_precedence_follows_the_table_of_b6() -> None:
    assert precedence(TeamEntry({"grader": P}, True, D), C, "grader") == (P, "override")
    assert precedence(TeamEntry({"grader": P}), None, "grader") == (P, "override")
    assert precedence(TeamEntry({}, True, D), C, "grader") == (D, "team-default")
    assert precedence(TeamEntry({}, True, None), C, "grader") == (None, "base")
    assert precedence(TeamEntry({}), C, "grader") == (C, "team-default")
    assert precedence(TeamEntry({}), None, "grader") == (None, "base")
    assert precedence(TeamEntry({"coder": P}), None, "grader") == (None, "base")


async def test_i1_unconfigured_requests_are_unchanged() -> None:
    runs = []
    for plugin in (False, True):
        async with world(plugin=plugin, members=("grader",)) as w:
            await w.step("grader")
            runs.append(
                ([r[1:] for r in w.routes], headers(await w.events("grader")), notices(await w.events("grader")))
            )
    assert runs[0] == runs[1] and runs[1][2] == []


def _records(events: list[dict[str, Any]]) -> list[Any]:
    kinds = ("subagent/descriptor", "subagent/catalog", "team/member")
    return [(e["type"], e["data"]) for e in events if e["type"] in kinds]


async def test_i2_an_override_changes_only_the_route_and_the_prompt_variables() -> None:
    async with world() as w:
        lead_before, grader_before = _records(w.lead.events), _records(await w.events("grader"))
        roster_before = await w.call(w.lead, "list_agents", {})
        await w.call(w.lead, "team_model_set", {"target": "grader", "model": "provider-b/model-b"})
        events = await w.step("grader")
        assert headers(events) == [B]
        systems = [e for e in events if e["type"] == "system/message"]
        assert not systems or "model-b" in str(systems[-1]["data"])
        assert _records(w.lead.events) == lead_before
        assert _records(await w.events("grader")) == grader_before
        roster_after = await w.call(w.lead, "list_agents", {})
        ignored = ("status", "model", "route", "routeSource")  # the route fields are ours: they show the change
        strip = [{k: v for k, v in row.items() if k not in ignored} for row in roster_before]
        assert [{k: v for k, v in row.items() if k not in ignored} for row in roster_after] == strip


async def test_i3_the_echo_is_decoration_only() -> None:
    routes = []
    for echo in (True, False):
        async with world(config={"echoSelection": echo}, members=("grader",)) as w:
            async with w.holding("grader"):
                await w.call(w.lead, "team_model_set", {"target": "grader", "model": "provider-b/model-b"})
            await w.step("grader")
            echoes = [e for e in await w.events("grader") if e["type"] == "model/selection"]
            assert len(echoes) == (1 if echo else 0)
            assert all(e["data"] == B for e in echoes)
            routes.append(w.routes_of(w.member_id("grader")))
    assert routes[0] == routes[1] and routes[0][-1] == ("provider-b", "model-b", None)


async def test_i4_the_lead_requests_never_change() -> None:
    async with world() as w:
        await w.call(w.lead, "team_model_set", {"target": "grader", "model": "provider-b/model-b"})
        await w.call(w.lead, "team_model_default", {"model": "provider-b/model-b"})
        await w.lead_turn()
        assert set(w.routes_of(w.lead.session_id)) == {("provider-a", "model-a", None)}
        assert headers(w.lead.events) == [A]


async def test_i5_a_request_in_flight_keeps_its_route() -> None:
    async with world(members=("grader",)) as w:
        grader = w.member_id("grader")
        async with w.holding("grader"):
            await w.call(w.lead, "team_model_set", {"target": "grader", "model": "provider-b/model-b"})
        assert w.routes_of(grader)[-1] == ("provider-a", "model-a", None)
        await w.step("grader")
        assert w.routes_of(grader)[-1] == ("provider-b", "model-b", None)
