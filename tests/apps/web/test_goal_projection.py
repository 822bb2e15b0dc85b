"""The session detail's ``goal`` projection: the goal chip's data, folded from ``goal/change`` records and the
rounds' prompts, the same from a live session, a stored log's first (digest) read and its full read."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from pydsh.goals import service as goal_service
from tests.apps.web.conftest import open_web
from tests.apps.web.test_api import read_stream, until
from tests.apps.web.test_digest import answered

GOAL_ID = "goal-00000000-0000-4000-8000-000000000003"
SCRIPT = [
    {"tool_calls": [{"name": "create_goal", "arguments": {"objective": "Tidy the notes", "max_goal_rounds": 4}}]},
    {"text": "Goal set."},
    {"tool_calls": [{"name": "update_goal", "arguments": {"goal_id": GOAL_ID, "revision": 1, "action": "complete"}}]},
    {"text": "All done."},
]


def goal_of(detail: dict[str, Any]) -> dict[str, Any]:
    """The goal projection without its times (they are the clock's)."""
    view = dict(detail["projections"]["goal"])
    assert isinstance(view.pop("createdAt"), int) and isinstance(view.pop("updatedAt"), int)
    return view


async def test_the_goal_projection_is_the_same_live_from_a_digest_and_from_a_full_read(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(goal_service, "new_goal_id", lambda: GOAL_ID)
    expected = {
        "goal": {"id": GOAL_ID, "revision": 2, "objective": "Tidy the notes", "phase": "complete", "maxGoalRounds": 4},
        "roundsStarted": 1,
    }
    (tmp_path / "writer").mkdir()
    async for web in open_web(SCRIPT, isolated_home, tmp_path / "writer"):
        sid = str((await web.new_session("Keep going until the notes are tidy"))["session"]["sessionId"])
        await until(functools.partial(answered, web, sid, 2))
        live = (await web.client.get(f"/api/sessions/{sid}")).json()
        web.host.assert_consumed()
    assert goal_of(live) == expected
    (tmp_path / "reader").mkdir()
    async for web in open_web([], isolated_home, tmp_path / "reader"):
        digest = (await web.client.get(f"/api/sessions/{sid}")).json()
        watching = asyncio.ensure_future(read_stream(web, sid, lambda frames: False))  # reads the log whole
        views = web.server.hub.views
        await until(functools.partial(views.kept))
        full = (await web.client.get(f"/api/sessions/{sid}")).json()
        watching.cancel()
    assert "deferred" in digest and "deferred" not in full
    assert goal_of(digest) == goal_of(full) == expected
    assert digest["session"]["title"] == full["session"]["title"] == live["session"]["title"]


async def test_a_session_without_a_goal_has_a_null_goal_projection(isolated_home: Path, tmp_path: Path) -> None:
    async for web in open_web([{"text": "Hello."}], isolated_home, tmp_path):
        sid = str((await web.new_session("Hi"))["session"]["sessionId"])
        await web.idle(sid)
        assert (await web.client.get(f"/api/sessions/{sid}")).json()["projections"]["goal"] is None
