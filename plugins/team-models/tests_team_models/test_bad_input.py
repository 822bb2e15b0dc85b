"""Bad input gets one clear message and loses nothing: routes, state files, configuration, profiles without Teams."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from pydsh.contract.tools import TOOLS
from pydsh.testing import scripted_host
from tests_team_models.world import PLUGIN, PROVIDERS, headers, world

B = {"provider": "provider-b", "model": "model-b"}


def state_path(home: Path) -> Path:
    return home / "storages" / "team-models" / "state.json"


async def test_a_route_without_provider_is_refused_and_the_state_kept(tmp_path: Path) -> None:
    async with world(dsh_home=str(tmp_path)) as w:
        await w.call(w.lead, "team_model_set", {"target": "coder", "model": "provider-b/model-b"})
        before = state_path(tmp_path).read_bytes()
        refused = {
            "nope": ("TEAM_MODEL_INVALID_ROUTE", 'model must be "<provider>/<model>"'),
            "/model-b": ("TEAM_MODEL_INVALID_ROUTE", 'model must be "<provider>/<model>"'),
            "nowhere/model-b": ("TEAM_MODEL_INVALID_ROUTE", 'no adapter registered for provider "nowhere"'),
        }
        for model, expected in refused.items():
            assert await w.call(w.lead, "team_model_set", {"target": "grader", "model": model}) == expected
        assert await w.call(w.lead, "team_model_set", {"target": "tester", "model": "provider-b/model-b"}) == (
            "TEAM_MEMBER_NOT_FOUND",
            'active teammate "tester" not found',
        )
        assert state_path(tmp_path).read_bytes() == before
        listed = await w.call(w.lead, "team_model_list", {})
        assert [m["override"] for m in listed["members"]] == [None, B]


async def test_a_stored_unknown_provider_is_kept_named_once_and_fails_only_its_requests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with world(dsh_home=str(tmp_path)) as w:
        lead_id = w.lead.session_id
    unknown = {"provider": "gone", "model": "m"}
    body = {"version": 1, "teams": {lead_id: {"overrides": {"grader": unknown, "coder": B}}}}
    state_path(tmp_path).parent.mkdir(parents=True, exist_ok=True)
    state_path(tmp_path).write_text(json.dumps(body))
    with caplog.at_level(logging.WARNING, logger="pydsh_team_models"):
        async with world(dsh_home=str(tmp_path), lead_session=lead_id) as w:
            events = await w.step("grader")
            reasons = [e["data"]["reason"] for e in events if e["type"] == "turn/end"]
            assert [r["error"]["code"] for r in reasons if r["kind"] == "error"] == ["NO_ADAPTER"]
            assert headers(await w.step("coder"))[-1] == B
            listed = await w.call(w.lead, "team_model_list", {})
            assert [m["override"] for m in listed["members"]] == [unknown, B]
    warnings = [r.getMessage() for r in caplog.records if r.name == "pydsh_team_models"]
    assert len(warnings) == 1 and '"gone"' in warnings[0] and "grader" in warnings[0]
    assert json.loads(state_path(tmp_path).read_text()) == body


async def test_an_invalid_default_model_is_one_warning_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pydsh_team_models"):
        async with world(config={"defaultModel": "nope"}) as w:
            listed = await w.call(w.lead, "team_model_list", {})
            assert listed["teamDefault"] is None
    warnings = [r.getMessage() for r in caplog.records if r.name == "pydsh_team_models"]
    assert len(warnings) == 1 and "'nope'" in warnings[0]


async def test_without_agent_teams_the_plugin_does_nothing() -> None:
    row = [{"insert": [{"id": "team-models", "name": PLUGIN, "config": {}}]}]
    async with scripted_host([[{"text": "hi"}]], providers=PROVIDERS, patches=[row]) as host:
        agent = await host.create_agent(provider="provider-a", model="model-a")
        assert (await agent.run("hello")).final_response == "hi"
        assert host.ctx.require(TOOLS).lookup(agent.live, "team_model_list") is None
