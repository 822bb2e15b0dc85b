"""The state file on its own (spec 08 §B.4): atomic writes, other processes' Teams kept, quarantine, bad writes."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
from pydsh_team_models import state
from pydsh_team_models.state import StateStore, StorageError, TeamEntry

from pydsh.agent import Route


async def test_a_write_keeps_teams_another_process_wrote(tmp_path: Path) -> None:
    path = tmp_path / "tm" / "state.json"
    first, second = StateStore(path), StateStore(path)
    first.load()
    second.load()
    await first.commit("team-1", TeamEntry({"grader": Route("p", "m")}))
    await second.commit("team-2", TeamEntry({}, True, None))
    body = json.loads(path.read_text())
    assert body == {
        "version": 1,
        "teams": {
            "team-1": {"overrides": {"grader": {"provider": "p", "model": "m"}}},
            "team-2": {"default": None, "overrides": {}},
        },
    }
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.json", "state.json.lock"]


async def test_a_failed_write_changes_neither_file_nor_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.json"
    store = StateStore(path)
    await store.commit("team-1", TeamEntry({"grader": Route("p", "m", "high")}))
    before = path.read_bytes()

    def fail(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(state.os, "replace", fail)
    with pytest.raises(StorageError, match="disk full"):
        await store.commit("team-1", TeamEntry({}))
    assert path.read_bytes() == before
    assert store.team("team-1").overrides == {"grader": Route("p", "m", "high")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.json.lock"]


def test_a_missing_file_is_empty_and_a_wrong_top_level_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = StateStore(path)
    store.load()
    assert store.teams == {}
    path.write_text(json.dumps({"version": 2, "teams": {}}))
    store.load()
    (moved,) = list(tmp_path.iterdir())
    assert re.fullmatch(r"state\.json\.corrupt-\d{8}T\d{6}Z-[0-9a-f]{8}", moved.name)
    assert json.loads(moved.read_text()) == {"version": 2, "teams": {}}
