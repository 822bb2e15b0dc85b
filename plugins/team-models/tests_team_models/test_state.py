"""The state file on its own (spec 08 §B.4): atomic writes, other processes' Teams kept, quarantine, bad writes."""

from __future__ import annotations

import json
import logging
import re
import stat
from pathlib import Path

import pytest
from pydsh_team_models import state
from pydsh_team_models.state import StateStore, StorageError, TeamEntry

from pydsh.plugin import Route


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


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "pydsh_team_models" and r.levelno >= logging.WARNING]


async def test_a_directory_in_place_of_the_file_starts_empty_and_is_never_touched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.json"
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    store = StateStore(path)
    with caplog.at_level(logging.WARNING, logger="pydsh_team_models"):
        store.load()
    assert store.teams == {}
    assert warnings_of(caplog) == [
        f"team-models: cannot read the state file {path} (Is a directory); starting empty and leaving it as it is"
    ]
    with pytest.raises(StorageError) as caught:
        await store.commit("team-1", TeamEntry({"grader": Route("p", "m")}))
    assert str(caught.value) == "state.json cannot be read (Is a directory); it is left as it is"
    assert (path / "keep.txt").read_text() == "mine" and store.teams == {}


def test_a_file_that_is_not_utf8_is_quarantined(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b'{"version": 1, "teams": {"\xff": {}}}')
    store = StateStore(path)
    with caplog.at_level(logging.WARNING, logger="pydsh_team_models"):
        store.load()
    (moved,) = list(tmp_path.iterdir())
    assert moved.name.startswith("state.json.corrupt-") and moved.read_bytes().endswith(b"{}}}")
    assert store.teams == {} and len(warnings_of(caplog)) == 1


async def test_a_corrupt_file_that_cannot_be_moved_aside_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.json"
    path.write_text("{")

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied", str(src))

    monkeypatch.setattr(state.os, "replace", refuse)
    store = StateStore(path)
    with caplog.at_level(logging.WARNING, logger="pydsh_team_models"):
        store.load()
    assert store.teams == {}
    assert warnings_of(caplog) == [
        "team-models: the state file is corrupt and could not be moved aside (state.json: Permission denied); "
        "starting empty and leaving it as it is"
    ]
    with pytest.raises(StorageError) as caught:
        await store.commit("team-1", TeamEntry({"grader": Route("p", "m")}))
    assert str(caught.value) == "state.json: Permission denied" and path.read_text() == "{"


async def test_pruning_removes_only_the_given_teams_and_keeps_teams_written_since(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    ours, other = StateStore(path), StateStore(path)
    await ours.commit("gone", TeamEntry({"grader": Route("p", "m")}))
    await ours.commit("kept", TeamEntry({}, True, None))
    other.load()
    await other.commit("newer", TeamEntry({"coder": Route("p", "m")}))
    assert await ours.prune({"gone", "never-stored"}) == 1
    assert sorted(json.loads(path.read_text())["teams"]) == ["kept", "newer"]
    assert sorted(ours.teams) == ["kept", "newer"]


async def test_a_team_left_with_nothing_stored_is_dropped_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = StateStore(path)
    await store.commit("team-1", TeamEntry({"grader": Route("p", "m")}))
    await store.commit("team-1", TeamEntry({}))
    assert json.loads(path.read_text()) == {"version": 1, "teams": {}}


def test_many_invalid_entries_are_named_up_to_a_limit_then_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.json"
    teams = {f"team-{i}": {"overrides": {"grader": {"provider": "p"}}} for i in range(25)}
    path.write_text(json.dumps({"version": 1, "teams": teams}))
    with caplog.at_level(logging.WARNING, logger="pydsh_team_models"):
        StateStore(path).load()
    warnings = warnings_of(caplog)
    assert len(warnings) == 11 and all("member grader override" in w for w in warnings[:10])
    assert warnings[10] == "team-models: 15 more invalid entries of the state file were dropped without a warning each"
