"""What the API tells the page is what runs: the effort of a new session, a route's base URL in effect and an
offline session's kept queued prompt (issue 24)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.keys import AGENTS
from pydsh.apps.web.providers import Providers
from pydsh.host import Host
from pydsh.session.keys import SESSIONS
from tests.apps.web.conftest import JSON, open_web
from tests.apps.web.test_api import read_stream, until

EFFORTFUL = [
    {
        "id": "deepseek-official",
        "models": [
            {
                "id": "deepseek-v4-flash",
                "contextWindow": 128000,
                "reasoningEfforts": ["off", "high", "max"],
                "defaultReasoningEffort": "high",
            }
        ],
    }
]


async def test_new_session_defaults_name_the_effort_the_session_runs(isolated_home: Path, tmp_path: Path) -> None:
    async for web in open_web([{"text": "hi"}], isolated_home, tmp_path, providers=EFFORTFUL):
        models = (await web.client.get("/api/models")).json()
        [official] = [p for p in models["providers"] if p["id"] == "deepseek-official"]
        [flash] = official["models"]
        assert flash["efforts"] == ["off", "high", "max"] and flash["defaultEffort"] == "high"
        assert models["defaults"] == {
            "permissionPreset": "workspace-write",
            "provider": "deepseek-official",
            "model": "deepseek-v4-flash",
            "effort": "high",
        }
        sid = (await web.new_session("Say hi"))["session"]["sessionId"]
        await web.idle(sid)
        [header] = [e for e in web.host.ctx.require(SESSIONS).get(sid).events if e["type"] == "request/header"]
        assert header["data"]["header"]["config"]["reasoningEffort"] == models["defaults"]["effort"]


async def test_deepseek_lists_the_base_url_in_effect(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/anthropic")
    async with Host("web", cwd=tmp_path, dsh_home=isolated_home) as host:
        listed = {p["id"]: p for p in await Providers(host.ctx, isolated_home, "web").listed()}
    assert listed["deepseek-official"]["baseUrl"] == "http://127.0.0.1:9/anthropic"
    assert listed["deepseek-official"]["baseUrlEnv"] == "DEEPSEEK_BASE_URL"
    assert listed["deepseek-openai"]["baseUrl"] == "https://api.deepseek.com"
    assert "baseUrlEnv" not in listed["deepseek-openai"]


def running(agent: Any) -> bool:
    return bool(agent.status == "running")


async def queue_behind_a_hanging_turn(isolated_home: Path, tmp_path: Path) -> tuple[str, str]:
    """A session whose server stopped while its turn ran and a second prompt waited: the log keeps the prompt."""
    tmp_path.mkdir()
    async for web in open_web([{"hang": True}, {"text": "second"}], isolated_home, tmp_path):
        sid = (await web.new_session("first"))["session"]["sessionId"]
        await until(functools.partial(running, web.host.ctx.require(AGENTS).get(sid)))
        queued = await web.post(f"/api/sessions/{sid}/prompt", {"text": "kept for later", "mode": "queue"})
        assert queued.status_code == 202 and queued.json()["queued"] is True
        kept = (sid, str(queued.json()["messageId"]))
    return kept


def queued_view(pending: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(q["messageId"], q["text"], q["mode"]) for q in pending["queued"]]


async def test_an_offline_sessions_kept_prompt_is_reported_and_removable(isolated_home: Path, tmp_path: Path) -> None:
    sid, message_id = await queue_behind_a_hanging_turn(isolated_home, tmp_path / "first")
    (tmp_path / "second").mkdir()
    async for web in open_web([], isolated_home, tmp_path / "second"):
        assert web.host.ctx.require(AGENTS).get(sid) is None
        detail = (await web.client.get(f"/api/sessions/{sid}")).json()
        assert detail["session"]["status"] == "offline"
        assert queued_view(detail["pending"]) == [(message_id, "kept for later", "queue")]
        assert detail["session"]["queued"] == 1
        frames = await read_stream(web, sid, bool)
        assert frames[0][0] == "hello" and queued_view(frames[0][1]["pending"]) == queued_view(detail["pending"])
        removed = await web.client.request("DELETE", f"/api/sessions/{sid}/queue/{message_id}", headers=JSON)
        assert removed.status_code == 204, removed.text
        after = (await web.client.get(f"/api/sessions/{sid}")).json()
        assert after["pending"]["queued"] == []
        events = web.host.ctx.require(SESSIONS).get(sid).events
        assert not any("kept for later" in json.dumps(e["data"]) for e in events if e["type"] == "user/message")
