"""Our addition to spec 08: ``list_agents`` names each teammate's selected route and its source."""

from __future__ import annotations

from typing import Any

from pydsh.teams.hooks import ROUTES_CHANGED
from pydsh.teams.tools import render
from tests_team_models.world import world

ROUTE_KEYS = ("route", "routeSource")
A = {"provider": "provider-a", "model": "model-a"}
B = {"provider": "provider-b", "model": "model-b"}


def _without_routes(roster: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in ROUTE_KEYS} for row in roster]


async def test_without_the_plugin_list_agents_is_byte_identical_to_the_reference_view() -> None:
    texts = []
    for plugin in (False, True):
        async with world(plugin=plugin) as w:
            roster = await w.call(w.lead, "list_agents", {})
            if not plugin:
                assert all(not set(ROUTE_KEYS) & set(row) for row in roster)
                assert list(roster[1]) == [
                    "target", "role", "status", "description", "provider", "context", "model", "diagnostics"
                ]  # fmt: skip
            texts.append(render(_without_routes(roster)))
    assert texts[0] == texts[1]


async def test_list_agents_follows_each_route_change_and_names_its_source() -> None:
    async with world() as w:
        changed: list[str] = []
        w.ctx.on(ROUTES_CHANGED, changed.append, global_=True)

        async def routes() -> dict[str, tuple[Any, Any]]:
            roster = await w.call(w.lead, "list_agents", {})
            assert "route" not in roster[0]
            return {row["target"]: (row["route"], row["routeSource"]) for row in roster[1:]}

        assert await routes() == {"grader": (A, "base"), "coder": (A, "base")}
        await w.call(w.lead, "team_model_set", {"target": "grader", "model": "provider-b/model-b"})
        assert await routes() == {"grader": (B, "override"), "coder": (A, "base")}
        await w.call(w.lead, "team_model_default", {"model": "provider-a/model-x", "reasoning_effort": None})
        x = {"provider": "provider-a", "model": "model-x"}
        assert await routes() == {"grader": (B, "override"), "coder": (x, "team-default")}
        await w.call(w.lead, "team_model_reset", {"all": True})
        await w.call(w.lead, "team_model_default", {"clear": True})
        assert await routes() == {"grader": (A, "base"), "coder": (A, "base")}
        assert changed == [w.lead.live.id] * 4
