"""The HTTP API and streams of spec 12 §4 against a loopback server of the ``web`` profile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from pydsh.agent.keys import AGENTS
from pydsh.session.keys import SESSION_PERSISTENCE, SESSION_QUERY, SESSIONS
from tests.apps.web.conftest import ESCALATE, JSON, Web, open_web
from tests.logs import log_text, stored_log


async def until(check: Callable[[], Any], timeout: float = 10) -> Any:
    """Poll ``check`` on the loop until it returns something truthy."""

    async def poll() -> Any:
        while not (value := check()):
            await asyncio.sleep(0.01)
        return value

    return await asyncio.wait_for(poll(), timeout)


async def read_stream(
    web: Web, session_id: str, stop: Callable[[list[tuple[str, Any, str | None]]], bool], **params: Any
) -> list[tuple[str, Any, str | None]]:
    """SSE frames ``(event, data, id)`` of the session stream until ``stop(frames)``."""
    frames: list[tuple[str, Any, str | None]] = []
    async with web.client.stream("GET", f"/api/sessions/{session_id}/stream", params=params) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event, data, sid = "message", "", None
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif line.startswith("id:"):
                sid = line[3:].strip()
            elif line == "" and data:
                frames.append((event, json.loads(data), sid))
                event, data, sid = "message", "", None
                if stop(frames):
                    break
    return frames


def turn_ended(frames: list[tuple[str, Any, str | None]]) -> bool:
    return any(f[0] == "session-event" and f[1]["type"] == "turn/end" for f in frames)


async def test_create_with_a_prompt_runs_it_and_lists_the_session(web: Web) -> None:
    created = await web.new_session("Say hello")
    session = created["session"]
    assert set(created) == {"session", "messageId", "acceptedAtSeq"}
    assert session["cwd"] == str(web.workspace) and session["agentPreset"] == "standard"
    await web.idle(session["sessionId"])
    listed = (await web.client.get("/api/sessions")).json()["sessions"]
    assert [s["sessionId"] for s in listed] == [session["sessionId"]]
    row = listed[0]
    assert row["title"] == "Say hello"
    assert row["status"] == "idle"
    assert row["stats"]["turns"] == 1 and row["stats"]["steps"] == 1
    assert row["model"] == {"provider": "deepseek-official", "model": "deepseek-v4-flash"}
    detail = (await web.client.get(f"/api/sessions/{session['sessionId']}")).json()
    assert detail["header"]["id"] == session["sessionId"]
    assert detail["projections"]["sessionStats"] == row["stats"]
    assert detail["projections"]["tokenUsage"]["outputTokens"] >= 0
    assert detail["pending"] == {"approvals": [], "questions": [], "queued": []}
    assert detail["projections"]["compaction"] == {"thresholdTokens": 62464, "contextWindow": 128000}
    user = [e for e in web.host.ctx.require(SESSIONS).get(session["sessionId"]).events if e["type"] == "user/message"]
    assert user[0]["data"]["source"]["kind"] == "user" and user[0]["data"]["source"]["rpcId"]


async def test_the_prompt_source_carries_client_message_id_and_zone(web: Web) -> None:
    sid = (await web.new_session())["session"]["sessionId"]
    body = {"text": "hi", "mode": "queue", "clientMessageId": "c-1", "clientTimeZone": "Europe/Paris"}
    response = await web.post(f"/api/sessions/{sid}/prompt", body)
    assert response.status_code == 202
    assert set(response.json()) == {"messageId", "queued", "acceptedAtSeq"}
    await web.idle(sid)
    events = web.host.ctx.require(SESSIONS).get(sid).events
    first = next(e for e in events if e["type"] == "user/message")
    assert first["data"]["source"] == {"kind": "user", "rpcId": "c-1", "clientTimeZone": "Europe/Paris"}


async def test_stream_replays_then_follows_live_without_gap_or_duplicate(web: Web) -> None:
    created = await web.new_session()
    sid = created["session"]["sessionId"]
    reader = asyncio.ensure_future(read_stream(web, sid, turn_ended))
    await asyncio.sleep(0.2)
    await web.post(f"/api/sessions/{sid}/prompt", {"text": "hello", "mode": "queue"})
    frames = await asyncio.wait_for(reader, 10)
    assert frames[0][0] == "hello" and frames[0][1]["sessionId"] == sid
    seqs = [f[1]["seq"] for f in frames if f[0] == "session-event"]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert [int(f[2]) for f in frames if f[0] == "session-event"] == seqs
    assert all(f[2] is None for f in frames if f[0] != "session-event")
    assert "running" in {f[1]["status"] for f in frames if f[0] == "status"}
    kinds = [f[1]["type"] for f in frames if f[0] == "assistant-stream"]
    assert kinds[0] == "start" and "end" in kinds
    log = web.host.ctx.require(SESSIONS).get(sid).events
    again = await read_stream(web, sid, turn_ended, after=seqs[2])
    replayed = [f[1]["seq"] for f in again if f[0] == "session-event"]
    assert replayed == [e["seq"] for e in log if e["seq"] > seqs[2]]
    resumed = await read_stream(
        web, sid, lambda fs: len(fs) > 1 or fs[0][1]["lastSeq"] == log[-1]["seq"], after=log[-1]["seq"]
    )
    assert [f[0] for f in resumed] == ["hello"]


async def test_accepted_at_seq_lets_a_late_stream_see_the_whole_turn(web: Web) -> None:
    created = await web.new_session("late watcher")
    sid = created["session"]["sessionId"]
    frames = await read_stream(web, sid, turn_ended, after=created["acceptedAtSeq"])
    types = [f[1]["type"] for f in frames if f[0] == "session-event"]
    assert "turn/start" in types and types[-1] == "turn/end"


async def test_events_pages_start_at_turn_boundaries(web: Web) -> None:
    sid = (await web.new_session("one"))["session"]["sessionId"]
    await web.idle(sid)
    await web.post(f"/api/sessions/{sid}/prompt", {"text": "two", "mode": "queue"})
    await web.idle(sid)
    log = web.host.ctx.require(SESSIONS).get(sid).events
    tail = (await web.client.get(f"/api/sessions/{sid}/events", params={"tail": "turns:1"})).json()
    assert tail["events"][0]["type"] == "turn/start" or tail["firstSeq"] == 0
    assert tail["lastSeq"] == log[-1]["seq"]
    starts = [e["seq"] for e in log if e["type"] == "turn/start"]
    page = (await web.client.get(f"/api/sessions/{sid}/events", params={"before": starts[1] + 1, "limit": 1})).json()
    assert page["events"][0]["seq"] == starts[1]
    assert page["hasMore"] is True
    first = (await web.client.get(f"/api/sessions/{sid}/events", params={"before": starts[1]})).json()
    assert first["firstSeq"] == 0 and first["hasMore"] is False
    assert (await web.client.get(f"/api/sessions/{sid}/events", params={"tail": "steps:1"})).status_code == 422


@pytest.mark.parametrize("script", [[ESCALATE, {"text": "done"}]])
async def test_approval_is_answered_from_the_browser_and_a_second_answer_is_409(web: Web) -> None:
    sid = (await web.new_session("Run a command that needs approval"))["session"]["sessionId"]
    hub = web.server.hub
    await until(lambda: hub.waiting.approvals)
    pending = (await web.client.get(f"/api/sessions/{sid}")).json()["pending"]["approvals"]
    assert len(pending) == 1
    ask = pending[0]
    assert ask["toolName"] == "bash" and ask["arguments"]["command"] == "echo escalated"
    assert "demo of the approval card" in ask["reason"]
    assert (await web.client.get("/api/sessions")).json()["sessions"][0]["waiting"] == {"approvals": 1, "questions": 0}
    url = f"/api/sessions/{sid}/approvals/{ask['approvalId']}"
    decided = await web.post(url, {"outcome": "allowed-once"})
    assert decided.status_code == 200 and decided.json() == {"outcome": "allowed-once"}
    await web.idle(sid)
    again = await web.post(url, {"outcome": "rejected"})
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_decided"
    events = web.host.ctx.require(SESSIONS).get(sid).events
    asked = [e for e in events if e["type"] == "approval/asked"]
    settled = [e for e in events if e["type"] == "approval/decided"]
    assert asked[0]["data"]["id"] == ask["approvalId"]
    assert settled[0]["data"] == {"id": ask["approvalId"], "outcome": "allowed-once"}
    assert asked[0]["seq"] < settled[0]["seq"]
    result = next(e for e in events if e["type"] == "tool/result")
    assert "escalated" in json.dumps(result["data"])
    unknown = await web.post(f"/api/sessions/{sid}/approvals/nope", {"outcome": "rejected"})
    assert unknown.status_code == 404


@pytest.mark.parametrize("script", [[ESCALATE, {"text": "done"}]])
async def test_a_rejected_approval_gives_the_rejection_result(web: Web) -> None:
    sid = (await web.new_session("Run it"))["session"]["sessionId"]
    ask = (await until(lambda: list(web.server.hub.waiting.approvals.values())))[0]
    response = await web.post(f"/api/sessions/{sid}/approvals/{ask.approval_id}", {"outcome": "rejected"})
    assert response.status_code == 200
    await web.idle(sid)
    events = web.host.ctx.require(SESSIONS).get(sid).events
    assert any(e["type"] == "approval/decided" and e["data"]["outcome"] == "rejected" for e in events)
    result = next(e for e in events if e["type"] == "tool/result")
    assert result["data"]["message"].get("isError")


@pytest.mark.parametrize("script", [[ESCALATE, {"text": "done"}]])
async def test_stopping_the_server_cancels_a_waiting_approval(web: Web) -> None:
    sid = (await web.new_session("Run it"))["session"]["sessionId"]
    await until(lambda: web.server.hub.waiting.approvals)
    await web.server.hub.stop()
    assert web.host.ctx.require(SESSIONS).get(sid) is None
    events = (await web.host.ctx.require(SESSION_QUERY).read_session(sid))["events"]
    ends = [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"]
    assert ends == ["aborted"]
    assert [e["data"]["outcome"] for e in events if e["type"] == "approval/decided"] == ["cancelled"]


@pytest.mark.parametrize("script", [[{"hang": True}, {"text": "second"}]])
async def test_queue_while_running_and_removing_a_queued_prompt(web: Web) -> None:
    sid = (await web.new_session("first"))["session"]["sessionId"]
    agent = web.host.ctx.require(AGENTS).get(sid)
    await until(lambda: agent.status == "running")
    queued = await web.post(f"/api/sessions/{sid}/prompt", {"text": "never run me", "mode": "queue"})
    assert queued.status_code == 202 and queued.json()["queued"] is True
    message_id = queued.json()["messageId"]
    pending = (await web.client.get(f"/api/sessions/{sid}")).json()["pending"]["queued"]
    assert [(q["messageId"], q["text"], q["mode"]) for q in pending] == [(message_id, "never run me", "queue")]
    removed = await web.client.request(
        "DELETE", f"/api/sessions/{sid}/queue/{message_id}", headers={"Content-Type": "application/json"}
    )
    assert removed.status_code == 204
    gone = await web.client.request(
        "DELETE", f"/api/sessions/{sid}/queue/{message_id}", headers={"Content-Type": "application/json"}
    )
    assert gone.status_code == 409 and gone.json()["error"]["code"] == "already_claimed"
    assert (await web.post(f"/api/sessions/{sid}/cancel", {})).status_code == 202
    await web.idle(sid)
    events = web.host.ctx.require(SESSIONS).get(sid).events
    texts = [json.dumps(e["data"]) for e in events if e["type"] == "user/message"]
    assert not any("never run me" in t for t in texts)
    ends = [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"]
    assert ends == ["aborted"]
    assert (await web.post(f"/api/sessions/{sid}/cancel", {})).status_code == 202


async def test_permission_title_and_model_changes_are_logged(web: Web) -> None:
    sid = (await web.new_session())["session"]["sessionId"]
    assert (await web.put(f"/api/sessions/{sid}/permission", {"preset": "read-only"})).json() == {"preset": "read-only"}
    assert (await web.put(f"/api/sessions/{sid}/permission", {"preset": "root"})).status_code == 422
    assert (await web.put(f"/api/sessions/{sid}/title", {"title": "My title"})).json() == {"title": "My title"}
    assert (await web.put(f"/api/sessions/{sid}/title", {"title": "  "})).status_code == 422
    model = {"provider": "deepseek-official", "model": "deepseek-v4-flash"}
    assert (await web.put(f"/api/sessions/{sid}/model", model)).json() == {"model": model}
    bad = await web.put(f"/api/sessions/{sid}/model", {"provider": "deepseek-official", "model": "nope"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "unknown_model"
    events = web.host.ctx.require(SESSIONS).get(sid).events
    assert [e["data"]["preset"] for e in events if e["type"] == "permission/preset"] == ["workspace-write", "read-only"]
    title = [e for e in events if e["type"] == "session/title"][-1]["data"]
    assert title["title"] == "My title" and title["source"] == {"kind": "user"}
    assert [e["data"] for e in events if e["type"] == "model/selection"] == [model]
    row = (await web.client.get("/api/sessions")).json()["sessions"][0]
    assert row["title"] == "My title" and row["permissionPreset"] == "read-only"


async def test_log_download_is_the_stored_log(web: Web) -> None:
    sid = (await web.new_session("log me"))["session"]["sessionId"]
    await web.idle(sid)
    response = await web.client.get(f"/api/sessions/{sid}/log")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert f'filename="{sid}.session.v4.jsonl"' in response.headers["content-disposition"]
    persistence = web.host.ctx.require(SESSION_PERSISTENCE)
    assert response.text == log_text(stored_log(persistence.find(sid)))
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["version"] == 4
    archive = await web.client.get(f"/api/sessions/{sid}/log", params={"tree": "1"})
    assert archive.headers["content-type"] == "application/zip"


async def test_agents_tree_of_a_lone_session_is_the_lead(web: Web) -> None:
    sid = (await web.new_session("alone"))["session"]["sessionId"]
    await web.idle(sid)
    root = (await web.client.get(f"/api/sessions/{sid}/agents")).json()["root"]
    assert root["name"] == "lead" and root["children"] == [] and root["status"] == "idle"
    assert root["model"]["source"] == "session" and root["model"]["model"] == "deepseek-v4-flash"
    team = await web.client.get(f"/api/sessions/{sid}/team")
    assert team.status_code == 404 and team.json()["error"]["code"] == "feature_unavailable"


async def test_workspaces_settings_and_info(web: Web, tmp_path: Any) -> None:
    info = (await web.client.get("/api/info")).json()
    assert info["profile"] == "web" and info["features"] == {
        "teams": False,
        "agentMessage": False,
        "directoryBrowser": True,
    }
    assert info["commands"] == [
        {"name": "compact", "description": "Compact the conversation now"},
        {"name": "schedule", "description": "List this session's reminders; /schedule delete ID cancels one"},
    ]
    listed = (await web.client.get("/api/known-workspaces")).json()["workspaces"]
    assert [w["path"] for w in listed] == [str(web.workspace)]
    other = tmp_path / "other"
    other.mkdir()
    added = await web.post("/api/known-workspaces", {"path": str(other)})
    assert added.status_code == 201 and added.json()["workspace"]["name"] == "other"
    missing = await web.post("/api/known-workspaces", {"path": str(tmp_path / "missing")})
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "not_a_directory"
    wid = added.json()["workspace"]["workspaceId"]
    assert (await web.delete(f"/api/known-workspaces/{wid}")).status_code == 204
    assert other.is_dir()
    assert [w["path"] for w in (await web.client.get("/api/known-workspaces")).json()["workspaces"]] == [
        str(web.workspace)
    ]
    settings = (await web.client.get("/api/settings")).json()
    assert settings["revision"] == 0 and settings["values"]["appearance.theme"] == "system"
    patched = await web.client.patch(
        "/api/settings",
        content=json.dumps({"expectedRevision": 0, "set": {"appearance.theme": "dark"}}),
        headers={"Content-Type": "application/json"},
    )
    assert patched.json()["revision"] == 1 and patched.json()["values"]["appearance.theme"] == "dark"
    stale = await web.client.patch(
        "/api/settings",
        content=json.dumps({"expectedRevision": 0, "set": {}}),
        headers={"Content-Type": "application/json"},
    )
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_revision"
    unknown = await web.client.patch(
        "/api/settings",
        content=json.dumps({"expectedRevision": 1, "set": {"x.y": 1}}),
        headers={"Content-Type": "application/json"},
    )
    assert unknown.status_code == 422 and "x.y" in unknown.json()["error"]["message"]
    assert (await web.client.get("/api/settings")).json()["values"]["appearance.theme"] == "dark"


async def test_api_keys_are_write_only(web: Web, isolated_home: Any) -> None:
    secret = "sk-test-SECRET"
    saved = await web.put("/api/providers/deepseek-official", {"kind": "deepseek", "apiKey": secret})
    assert saved.status_code == 200
    assert saved.json()["provider"]["configured"] is True and saved.json()["provider"]["keySource"] == "credentials"
    models = await web.client.get("/api/models")
    deepseek = next(p for p in models.json()["providers"] if p["id"] == "deepseek-official")
    assert deepseek["keySource"] == "credentials"
    for response in (saved, models, await web.client.get("/api/info"), await web.client.get("/api/settings")):
        assert secret not in response.text
    credentials = isolated_home / "credentials.json"
    assert json.loads(credentials.read_text())["deepseek-official"] == secret
    assert credentials.stat().st_mode & 0o777 == 0o600
    assert (
        await web.client.request(
            "DELETE", "/api/providers/deepseek-official", headers={"Content-Type": "application/json"}
        )
    ).status_code == 204
    assert "deepseek-official" not in json.loads(credentials.read_text())


ASK = {
    "tool_calls": [
        {
            "name": "ask_user_question",
            "arguments": {
                "questions": [
                    {
                        "id": "q1",
                        "header": "Colour",
                        "question": "Which colour?",
                        "options": [{"label": "Blue (Recommended)"}, {"label": "Red"}],
                    }
                ]
            },
        }
    ]
}


def tool_result_text(web: Web, session_id: str) -> str:
    events = web.host.ctx.require(SESSIONS).get(session_id).events
    result = next(e for e in events if e["type"] == "tool/result")
    return "".join(b["text"] for b in result["data"]["message"]["content"])


@pytest.mark.parametrize("script", [[ASK, {"text": "thanks"}]])
async def test_a_question_is_answered_from_the_browser(web: Web) -> None:
    sid = (await web.new_session("Ask me"))["session"]["sessionId"]
    await until(lambda: web.server.hub.waiting.questions)
    detail = (await web.client.get(f"/api/sessions/{sid}")).json()
    question = detail["pending"]["questions"][0]
    assert question["questions"][0]["options"][0]["label"] == "Blue (Recommended)"
    assert detail["session"]["waiting"] == {"approvals": 0, "questions": 1}
    url = f"/api/sessions/{sid}/questions/{question['requestId']}"
    bad = await web.post(url, {"answers": [{"id": "q1", "selected": ["Green"]}]})
    assert bad.status_code == 422 and "Green" in bad.json()["error"]["message"]
    unknown = await web.post(url, {"answers": [{"id": "q9", "selected": []}]})
    assert unknown.status_code == 422
    answered = await web.post(url, {"answers": [{"id": "q1", "selected": ["Blue (Recommended)"]}]})
    assert answered.status_code == 200
    assert answered.json() == {"answers": [{"id": "q1", "selected": ["Blue (Recommended)"]}]}
    await web.idle(sid)
    assert tool_result_text(web, sid) == '{"answers":[{"id":"q1","selected":["Blue (Recommended)"]}]}'
    again = await web.post(url, {"skip": True})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_answered"


@pytest.mark.parametrize("script", [[ASK, {"text": "ok"}]])
async def test_skip_answers_every_question_with_nothing_selected(web: Web) -> None:
    sid = (await web.new_session("Ask me"))["session"]["sessionId"]
    pending = (await until(lambda: list(web.server.hub.waiting.questions.values())))[0]
    response = await web.post(f"/api/sessions/{sid}/questions/{pending.request.request_id}", {"skip": True})
    assert response.json() == {"answers": [{"id": "q1", "selected": []}]}
    await web.idle(sid)
    assert tool_result_text(web, sid) == '{"answers":[{"id":"q1","selected":[]}]}'


@pytest.mark.parametrize("script", [[ASK, {"text": "ok"}]])
async def test_typed_text_is_the_custom_answer(web: Web) -> None:
    sid = (await web.new_session("Ask me"))["session"]["sessionId"]
    pending = (await until(lambda: list(web.server.hub.waiting.questions.values())))[0]
    body = {"answers": [{"id": "q1", "selected": [], "custom": "Teal"}]}
    assert (await web.post(f"/api/sessions/{sid}/questions/{pending.request.request_id}", body)).status_code == 200
    await web.idle(sid)
    assert tool_result_text(web, sid) == '{"answers":[{"id":"q1","selected":[],"custom":"Teal"}]}'


async def test_new_sessions_start_with_the_settings_defaults(web: Web, isolated_home: Any) -> None:
    change = {
        "general.defaultPermissionPreset": "read-only",
        "models.defaultProvider": "deepseek-official",
        "models.defaultModel": "deepseek-v4-flash",
    }
    patched = await web.client.patch(
        "/api/settings", content=json.dumps({"expectedRevision": 0, "set": change}), headers=JSON
    )
    assert patched.status_code == 200
    session = (await web.new_session())["session"]
    assert session["permissionPreset"] == "read-only"
    assert (await web.client.get("/api/info")).json()["defaults"]["permissionPreset"] == "read-only"
    ops = yaml.safe_load((isolated_home / "profiles" / "web" / "patch.yml").read_text())
    assert {
        "id": "agent-default-model",
        "config": {"provider": "deepseek-official", "model": "deepseek-v4-flash"},
    } in ops


async def test_an_openai_compatible_provider_goes_to_the_profile_patch(web: Web, isolated_home: Any) -> None:
    body = {
        "kind": "openai-compatible",
        "id": "local",
        "label": "Local",
        "baseUrl": "http://127.0.0.1:9/v1",
        "apiKey": "sk-local-SECRET",
        "models": [{"id": "m1", "contextWindow": 32000, "efforts": ["low", "high"]}],
    }
    created = await web.post("/api/providers", body)
    assert created.status_code == 201 and "sk-local-SECRET" not in created.text
    assert created.json()["provider"] == {
        "id": "local",
        "kind": "openai-compatible",
        "label": "Local",
        "configured": True,
        "keySource": "credentials",
    }
    missing = await web.post("/api/providers", {"kind": "openai-compatible", "id": "x"})
    assert missing.status_code == 422 and "baseUrl" in missing.json()["error"]["message"]
    from pydsh.kernel.profiles import compose_profile

    rows = {r.id: r for r in compose_profile("web", []).rows}
    [route] = rows["llm-openai-compat"].config["providers"]
    assert route == {
        "id": "local",
        "baseURL": "http://127.0.0.1:9/v1",
        "name": "Local",
        "models": [{"id": "m1", "contextWindow": 32000}],
        "reasoning": {"efforts": ["low", "high"]},
    }
    from pydsh.llm.openai_compat import Config as OpenAIConfig

    OpenAIConfig.model_validate(rows["llm-openai-compat"].config)
    assert (await web.delete("/api/providers/local")).status_code == 204
    rows = {r.id: r for r in compose_profile("web", []).rows}
    assert rows["llm-openai-compat"].config["providers"] == []


EFFORT_PROVIDERS = [
    {
        "id": "deepseek-official",
        "name": "Scripted",
        "models": [{"id": "deepseek-v4-flash", "contextWindow": 128000, "reasoningEfforts": ["low", "high"]}],
    }
]


async def test_models_list_effort_ids_and_a_change_names_one(isolated_home: Any, tmp_path: Any) -> None:
    async for web in open_web([{"text": "hi"}], isolated_home, tmp_path, providers=EFFORT_PROVIDERS):
        providers = (await web.client.get("/api/models")).json()["providers"]
        provider = next(p for p in providers if p["id"] == "deepseek-official")
        assert provider["models"] == [
            {
                "id": "deepseek-v4-flash",
                "label": "deepseek-v4-flash",
                "contextWindow": 128000,
                "efforts": ["low", "high"],
            }
        ]
        assert provider["configured"] is True  # the scripted route needs no key
        openai = next(p for p in providers if p["id"] == "deepseek-openai")
        assert openai["configured"] is False and "keySource" not in openai
        sid = (await web.new_session())["session"]["sessionId"]
        route = {"provider": "deepseek-official", "model": "deepseek-v4-flash", "effort": "high"}
        assert (await web.put(f"/api/sessions/{sid}/model", route)).json() == {"model": route}
        wrong = await web.put(f"/api/sessions/{sid}/model", {**route, "effort": "ludicrous"})
        assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "unknown_effort"
        events = web.host.ctx.require(SESSIONS).get(sid).events
        assert [e["data"] for e in events if e["type"] == "model/selection"] == [
            {"provider": "deepseek-official", "model": "deepseek-v4-flash", "reasoningEffort": "high"}
        ]
