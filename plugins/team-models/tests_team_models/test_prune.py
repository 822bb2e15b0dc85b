"""The state file stays bounded and readable: Teams of vanished Leads are pruned, an unreadable file is left alone."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import pytest

from pydsh.teams.keys import TEAM_ROUTES
from pydsh.testing import scripted_host
from tests_team_models.world import PROVIDERS, rows, world

B = {"provider": "provider-b", "model": "model-b"}


def state_path(home: Path) -> Path:
    return home / "storages" / "team-models" / "state.json"


def add_teams(home: Path, count: int) -> list[str]:
    """Add ``count`` Teams whose Leads were never stored to the state file; returns their ids."""
    body = json.loads(state_path(home).read_text())
    ids = [str(uuid.uuid4()) for _ in range(count)]
    body["teams"].update({team: {"overrides": {"grader": B}} for team in ids})
    state_path(home).write_text(json.dumps(body))
    return ids


async def test_teams_whose_lead_session_is_gone_are_pruned_at_start(tmp_path: Path) -> None:
    async with world(dsh_home=str(tmp_path)) as w:
        lead_id = w.lead.session_id
        await w.call(w.lead, "team_model_set", {"target": "grader", "model": "provider-b/model-b"})
    add_teams(tmp_path, 50)
    async with world(dsh_home=str(tmp_path), lead_session=lead_id) as w:
        await w.ctx.require(TEAM_ROUTES).pruning
        assert json.loads(state_path(tmp_path).read_text())["teams"] == {lead_id: {"overrides": {"grader": B}}}
        listed = await w.call(w.lead, "team_model_list", {})
        assert [m["override"] for m in listed["members"]] == [B, None]


async def test_nothing_is_pruned_while_the_session_store_lists_no_session(tmp_path: Path) -> None:
    state_path(tmp_path).parent.mkdir(parents=True)
    state_path(tmp_path).write_text(json.dumps({"version": 1, "teams": {}}))
    add_teams(tmp_path, 3)
    before = state_path(tmp_path).read_bytes()
    async with scripted_host([], providers=PROVIDERS, patches=rows(None, True), dsh_home=tmp_path) as host:
        await host.ctx.require(TEAM_ROUTES).pruning
    assert state_path(tmp_path).read_bytes() == before


async def test_a_directory_in_place_of_the_state_file_keeps_the_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state_path(tmp_path).mkdir(parents=True)
    (state_path(tmp_path) / "keep.txt").write_text("mine")
    with caplog.at_level(logging.WARNING, logger="pydsh_team_models"):
        async with world(dsh_home=str(tmp_path)) as w:
            listed = await w.call(w.lead, "team_model_list", {})
            assert [m["target"] for m in listed["members"]] == ["grader", "coder"]
            refused = await w.call(w.lead, "team_model_set", {"target": "grader", "model": "provider-b/model-b"})
            assert refused == (
                "TEAM_MODEL_STORAGE",
                "could not save team model state: state.json cannot be read (Is a directory); it is left as it is",
            )
    warnings = [r.getMessage() for r in caplog.records if r.name == "pydsh_team_models"]
    assert len(warnings) == 1 and "Is a directory" in warnings[0]
    assert (state_path(tmp_path) / "keep.txt").read_text() == "mine"
