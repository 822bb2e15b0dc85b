"""The agent tree, the Team panel and optional panels over the web API (spec 12 F30–F32, §7)."""

from __future__ import annotations

import asyncio
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.keys import AGENTS
from pydsh.agent.presets import preset_setup
from pydsh.agent.registry import CreateAgentOptions
from pydsh.apps.web.state import Config, PanelConfig
from pydsh.subagents.keys import SUBAGENTS
from tests.apps.web.conftest import Web, open_web
from tests.apps.web.test_api import read_stream

TEAMS = [{"id": "agent-teams", "disabled": False}, {"id": "tool-agent-team", "disabled": False}]


def calls(*items: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(items)}


async def quiet(web: Web, timeout: float = 20) -> None:
    """Until no agent runs or holds input and every activation settled, three polls in a row."""
    service = web.host.ctx.require(SUBAGENTS)
    agents = web.host.ctx.require(AGENTS)

    async def poll() -> None:
        calm = 0
        while calm < 3:
            busy = any(a.status != "idle" or a.inbox.has_pending for a in agents.all())
            settling = any(a.settling is not None for a in service.activations.values())
            calm = 0 if busy or settling else calm + 1
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


DELEGATE = calls(
    {"name": "subagent", "arguments": {"name": "reviewer", "description": "review the change", "prompt": "review"}}
)


@pytest.mark.parametrize("script", [[[DELEGATE] + [{"text": "lead done"}] * 3, [{"text": "review done"}]]])
async def test_the_tree_names_the_subagent_with_its_model_and_outcome(web: Web) -> None:
    lead = (await web.new_session("Delegate a review"))["session"]["sessionId"]
    frames = asyncio.ensure_future(read_stream(web, lead, lambda fs: any(f[0] == "agents" for f in fs)))
    await quiet(web)
    root = (await web.client.get(f"/api/sessions/{lead}/agents")).json()["root"]
    assert root["name"] == "lead" and root["sessionId"] == lead
    assert root["model"] == {"provider": "deepseek-official", "model": "deepseek-v4-flash", "source": "session"}
    [child] = root["children"]
    assert child["name"] == "reviewer"
    assert child["outcome"] == "completed"
    assert child["status"] in ("idle", "inactive")
    assert child["model"]["source"] == "descriptor" and child["model"]["model"] == "deepseek-v4-flash"
    assert child["tokens"] > 0 and child["startedAt"] >= root["startedAt"]
    listed = [s["sessionId"] for s in (await web.client.get("/api/sessions")).json()["sessions"]]
    assert listed == [lead]
    member = (await web.client.get(f"/api/sessions/{child['sessionId']}")).json()["session"]
    assert member["parentSessionId"] == lead and member["name"] == "reviewer"
    pushed = [f for f in await asyncio.wait_for(frames, 10) if f[0] == "agents"]
    assert pushed[-1][1]["root"]["children"][0]["name"] == "reviewer"
    tree = await web.client.get(f"/api/sessions/{lead}/log", params={"tree": "1"})
    names = zipfile.ZipFile(io.BytesIO(tree.content)).namelist()
    assert sorted(names) == sorted(f"{sid}.session.v4.jsonl" for sid in (lead, child["sessionId"]))


SPAWN = calls({"name": "spawn_teammate", "arguments": {"name": "grader", "description": "grade", "prompt": "grade it"}})
TASK = calls({"name": "team_task_create", "arguments": {"subject": "Grade the work", "description": "grade it"}})


async def test_the_team_panel_shows_members_and_tasks(isolated_home: Path, tmp_path: Path) -> None:
    script = [[SPAWN, TASK] + [{"text": "lead done"}] * 4, [{"text": "graded"}] * 3]
    async for web in open_web(script, isolated_home, tmp_path, patches=[TEAMS]):
        assert (await web.client.get("/api/info")).json()["features"]["teams"] is True
        panels = (await web.client.get("/api/ui/panels")).json()["panels"]
        assert {"id": "team", "url": "/static/v0.1.0/team.js", "status": "ready"} in panels
        lead = (await web.new_session("Build a team"))["session"]["sessionId"]
        await quiet(web)
        team = (await web.client.get(f"/api/sessions/{lead}/team")).json()
        names = {m["name"]: m for m in team["members"]}
        assert set(names) == {"lead", "grader"}
        assert names["lead"]["role"] == "lead" and names["grader"]["role"] == "teammate"
        assert names["grader"]["model"]["model"] == "deepseek-v4-flash"
        assert names["grader"]["model"]["source"] == "descriptor"
        [task] = team["tasks"]
        assert task["subject"] == "Grade the work" and task["status"] == "pending"
        hello = await read_stream(web, lead, lambda fs: any(f[0] == "team" for f in fs))
        assert next(f for f in hello if f[0] == "team")[1] == team


async def test_without_teams_there_is_no_team_panel(web: Web) -> None:
    assert (await web.client.get("/api/ui/panels")).json() == {"panels": []}
    assert (await web.client.get("/api/info")).json()["features"]["teams"] is False


def routes(ctx: Any) -> list[Any]:
    """A panel's server part for the test below: one route."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def hello(request: Any) -> JSONResponse:
        return JSONResponse({"hello": "panel"})

    return [Route("/hello", hello)]


async def test_a_panel_whose_server_part_fails_is_unavailable_alone(isolated_home: Path, tmp_path: Path) -> None:
    config = Config(
        panels=[
            PanelConfig(id="broken", url="/static/v0.1.0/broken.js", server="tests.apps.web.no_such_module:routes"),
            PanelConfig(id="extra", url="/static/v0.1.0/extra.js", server="tests.apps.web.test_agents:routes"),
        ]
    )
    async for web in open_web([{"text": "still chatting"}], isolated_home, tmp_path, config=config):
        panels = {p["id"]: p for p in (await web.client.get("/api/ui/panels")).json()["panels"]}
        assert panels["broken"]["status"] == "unavailable"
        assert panels["broken"]["reason"] == "its server part failed to load (ModuleNotFoundError)"
        assert panels["extra"] == {"id": "extra", "url": "/static/v0.1.0/extra.js", "status": "ready"}
        assert (await web.client.get("/api/panels/extra/hello")).json() == {"hello": "panel"}
        sid = (await web.new_session("chat still works"))["session"]["sessionId"]
        await web.idle(sid)
        assert (await web.client.get("/api/sessions")).json()["sessions"][0]["stats"]["turns"] == 1


SEND = calls({"name": "send_agent_message", "arguments": {"to": "peer-b", "content": "please check"}})


async def test_cross_session_messages_show_their_delivery_state(isolated_home: Path, tmp_path: Path) -> None:
    pytest.importorskip("pydsh_agent_message", reason="the agent-message plugin distribution is not installed")
    patch = [{"insert": [{"id": "agent-message", "name": "agent-message"}]}]
    script = [[SEND, {"text": "sent"}], [{"text": "got it"}]]
    async for web in open_web(script, isolated_home, tmp_path, patches=[patch]):
        info = (await web.client.get("/api/info")).json()
        assert info["features"]["agentMessage"] is True and info["unavailablePlugins"] == []
        panels = (await web.client.get("/api/ui/panels")).json()["panels"]
        assert panels == [{"id": "messages", "url": "/static/v0.1.0/messages.js", "status": "ready"}]
        ctx = web.host.ctx
        peer = await ctx.require(AGENTS).create(
            CreateAgentOptions(session_id="peer-b", cwd=str(web.workspace), setup=preset_setup(ctx))
        )
        try:
            sender = (await web.new_session("Message peer b"))["session"]["sessionId"]
            await quiet(web)
            [sent] = (await web.client.get(f"/api/sessions/{sender}/messages")).json()["messages"]
            assert sent["to"] == "peer-b" and sent["mode"] == "followup"
            assert sent["state"] == "claimed"
            relays = [e for e in peer.agent.session.events if e["type"] == "user/message"]
            assert relays[0]["data"]["id"] == sent["messageId"]
            assert relays[0]["data"]["source"]["senderSessionId"] == sender
            none = (await web.client.get("/api/sessions/peer-b/messages")).json()
            assert none == {"messages": []}
        finally:
            await peer.dispose()


async def test_delivery_states_are_pushed_on_the_sender_stream(isolated_home: Path, tmp_path: Path) -> None:
    pytest.importorskip("pydsh_agent_message", reason="the agent-message plugin distribution is not installed")
    patch = [{"insert": [{"id": "agent-message", "name": "agent-message"}]}]
    script = [[SEND, {"text": "sent"}], [{"text": "got it"}]]
    async for web in open_web(script, isolated_home, tmp_path, patches=[patch]):
        ctx = web.host.ctx
        peer = await ctx.require(AGENTS).create(
            CreateAgentOptions(session_id="peer-b", cwd=str(web.workspace), setup=preset_setup(ctx))
        )
        try:
            sender = (await web.new_session())["session"]["sessionId"]

            def claimed(frames: list[tuple[str, Any, str | None]]) -> bool:
                views = [f[1]["messages"] for f in frames if f[0] == "messages"]
                return bool(views) and [m["state"] for m in views[-1]] == ["claimed"]

            reading = asyncio.ensure_future(read_stream(web, sender, claimed))
            await asyncio.sleep(0.2)
            await web.post(f"/api/sessions/{sender}/prompt", {"text": "Message peer b"})
            frames = await asyncio.wait_for(reading, 20)
            [pushed] = [f[1] for f in frames if f[0] == "messages"][-1]["messages"]
            assert pushed["to"] == "peer-b" and pushed["toTitle"]
            relays = [e for e in peer.agent.session.events if e["type"] == "user/message"]
            assert relays[0]["data"]["id"] == pushed["messageId"]
        finally:
            await peer.dispose()


async def test_without_agent_message_there_is_no_delivery_endpoint(web: Web) -> None:
    sid = (await web.new_session())["session"]["sessionId"]
    response = await web.client.get(f"/api/sessions/{sid}/messages")
    assert response.status_code == 404 and response.json()["error"]["code"] == "feature_unavailable"


async def test_a_row_that_fails_to_load_is_listed_for_settings_about(isolated_home: Path, tmp_path: Path) -> None:
    patch = [{"insert": [{"id": "broken-row", "name": "no-such-plugin-anywhere"}]}]
    async for web in open_web([{"text": "hi"}], isolated_home, tmp_path, patches=[patch]):
        failed = (await web.client.get("/api/info")).json()["unavailablePlugins"]
        assert [(f["id"], f["plugin"]) for f in failed] == [("broken-row", "no-such-plugin-anywhere")]
        assert "\n" not in failed[0]["reason"]
