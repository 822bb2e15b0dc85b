"""``pydsh.team`` (ours): the roster with each teammate's route, sent only after the opt-in."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pydsh.wire.protocol import InitializeParams
from tests.sdk.conftest import REPO, Raw, ThreadedMock

TEAMS = [{"id": "agent-teams", "disabled": False}, {"id": "tool-agent-team", "disabled": False}]
PLUGIN = [{"insert": [{"id": "team-models", "name": "pydsh_team_models.plugin"}]}]
SPAWN = {
    "tool_calls": [
        {"name": "spawn_teammate", "arguments": {"name": "grader", "description": "grades", "prompt": "Grade."}}
    ]
}
# Whichever of the Lead and grader receives it, the call overrides grader's route (a teammate may set its own).
SET = {"tool_calls": [{"name": "team_model_set", "arguments": {"target": "grader", "model": "deepseek-official/deepseek-v4-pro"}}]}  # fmt: skip
TEXT = {"text": "Done."}


def test_initialize_parses_the_team_opt_in() -> None:
    base = {"cwd": "/", "provider": "p", "model": "m"}
    assert InitializeParams.model_validate({**base, "pydshExtensions": {"team": True}}).team
    assert not InitializeParams.model_validate({**base, "pydshExtensions": {"team": "yes"}}).team
    assert not InitializeParams.model_validate(base).team


def _grader(frames: list[dict[str, Any]], source: str) -> dict[str, Any] | None:
    """The last ``pydsh.team`` grader row whose route source is ``source``."""
    rows = [
        row
        for f in frames
        if f.get("method") == "pydsh.team"
        for row in f["params"]["members"]
        if row["target"] == "grader" and row.get("routeSource") == source
    ]
    return rows[-1] if rows else None


def test_team_notification_carries_the_roster_with_routes(
    raw: Callable[..., Raw], mock: Callable[..., ThreadedMock], tmp_path: Path
) -> None:
    patch = tmp_path / "teams.yml"
    patch.write_text(yaml.safe_dump(TEAMS + PLUGIN))
    model = mock([SPAWN, SET, TEXT, TEXT, TEXT, TEXT])
    path = os.pathsep.join([str(REPO), str(REPO / "plugins" / "team-models")])
    peer = raw(model.base_url, ("--patch", str(patch)), PYTHONPATH=path)
    assert peer.initialize(pydshExtensions={"team": True})["result"]["pydsh"]["extensions"] == ["team"]
    peer.request("p", "session/prompt", {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "go"}]})
    base = peer.wait_for(lambda frames: _grader(frames, "base"))
    assert base["route"] == {"provider": "deepseek-official", "model": "deepseek-v4-flash"}
    override = peer.wait_for(lambda frames: _grader(frames, "override"))
    assert override["route"] == {"provider": "deepseek-official", "model": "deepseek-v4-pro"}
    teams = [f for f in peer.frames() if f.get("method") == "pydsh.team"]
    assert all(f["params"]["sessionId"] == "t1" for f in teams)
    assert teams[0]["params"]["members"][0] == {
        "target": "lead",
        "role": "lead",
        "status": "running",
        "model": "deepseek-v4-flash",
        "diagnostics": [],
    }
