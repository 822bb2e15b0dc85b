"""Bad input gets its status code and one line of JSON; the server keeps serving and no log is damaged."""

from __future__ import annotations

import fcntl
import json
import os
from typing import Any

import httpx
import pytest

from pydsh.agent.keys import AGENTS
from pydsh.agent.presets import preset_setup
from pydsh.agent.registry import CreateAgentOptions
from pydsh.contract.agent import user_message
from pydsh.session.keys import SESSION_PERSISTENCE, SESSION_QUERY, SESSIONS
from tests.apps.web.conftest import JSON, Web
from tests.logs import log_lines, stored_log


def one_line_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert "\n" not in body["error"]["message"] and body["error"]["message"].endswith(".")
    if code is not None:
        assert body["error"]["code"] == code
    return dict(body["error"])


async def stored_log_is_sound(web: Web, session_id: str) -> None:
    """Every line of the stored log parses and the log reads back validated."""
    await web.host.ctx.require(SESSIONS).flush(web.host.ctx.require(SESSIONS).get(session_id))
    lines = log_lines(stored_log(web.host.ctx.require(SESSION_PERSISTENCE).find(session_id)))
    assert all(json.loads(line) for line in lines)
    read = await web.host.ctx.require(SESSION_QUERY).read_session(session_id)
    assert len(read["events"]) == len(lines) - 1


async def test_oversize_bodies_are_413(web: Web) -> None:
    sid = (await web.new_session("first"))["session"]["sessionId"]
    await web.idle(sid)
    huge = json.dumps({"text": "x" * (2 * 1024 * 1024 + 10)})
    one_line_error(
        await web.client.post(f"/api/sessions/{sid}/prompt", content=huge, headers=JSON), 413, "body_too_large"
    )

    async def chunks() -> Any:
        for _ in range(3):
            yield b" " * (1024 * 1024)
        yield b'{"text": "hi"}'

    streamed = await web.client.post(f"/api/sessions/{sid}/prompt", content=chunks(), headers=JSON)
    one_line_error(streamed, 413, "body_too_large")
    big_prompt = {"text": "y" * (1024 * 1024 + 1), "mode": "queue"}
    one_line_error(await web.post(f"/api/sessions/{sid}/prompt", big_prompt), 413, "prompt_too_large")
    one_line_error(
        await web.post("/api/sessions", {"cwd": str(web.workspace), "prompt": {"text": big_prompt["text"]}}), 413
    )
    assert (await web.post(f"/api/sessions/{sid}/prompt", {"text": "still fine"})).status_code == 202
    await web.idle(sid)
    await stored_log_is_sound(web, sid)
    events = web.host.ctx.require(SESSIONS).get(sid).events
    assert [
        e["data"]["content"][0]["text"]
        for e in events
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"
    ] == ["first", "still fine"]


async def test_unknown_fields_are_422_naming_the_field(web: Web) -> None:
    error = one_line_error(
        await web.post("/api/sessions", {"cwd": str(web.workspace), "colour": "red"}), 422, "unknown_field"
    )
    assert '"colour"' in error["message"]
    nested = await web.post("/api/sessions", {"cwd": str(web.workspace), "prompt": {"text": "hi", "extra": 1}})
    assert "prompt.extra" in one_line_error(nested, 422, "unknown_field")["message"]
    assert '"cwd"' in one_line_error(await web.post("/api/sessions", {}), 422, "invalid_field")["message"]
    one_line_error(await web.client.post("/api/sessions", content=b"{not json", headers=JSON), 400, "bad_json")
    one_line_error(await web.client.post("/api/sessions", content=b"[1]", headers=JSON), 422, "invalid_body")
    assert (await web.client.get("/api/sessions")).json()["sessions"] == []


async def test_bad_prompts_are_refused_before_anything_is_queued(web: Web) -> None:
    sid = (await web.new_session())["session"]["sessionId"]
    before = len(web.host.ctx.require(SESSIONS).get(sid).events)
    one_line_error(
        await web.post(f"/api/sessions/{sid}/prompt", {"text": "hi", "clientTimeZone": "Mars/Olympus"}),
        422,
        "invalid_time_zone",
    )
    one_line_error(await web.post(f"/api/sessions/{sid}/prompt", {"text": "   "}), 422, "empty_prompt")
    one_line_error(await web.post(f"/api/sessions/{sid}/prompt", {"text": "hi", "mode": "shout"}), 422, "invalid_field")
    one_line_error(await web.post("/api/sessions/no-such-session/prompt", {"text": "hi"}), 404, "not_found")
    one_line_error(await web.post("/api/sessions", {"cwd": str(web.workspace / "missing")}), 422, "not_a_directory")
    assert len(web.host.ctx.require(SESSIONS).get(sid).events) == before


async def test_a_prompt_to_a_member_session_is_409(web: Web) -> None:
    lead = (await web.new_session("lead work"))["session"]["sessionId"]
    await web.idle(lead)
    ctx = web.host.ctx
    handle = await ctx.require(AGENTS).create(
        CreateAgentOptions(cwd=str(web.workspace), parent_session=lead, origin="subagent", setup=preset_setup(ctx))
    )
    try:
        member = handle.agent.id
        one_line_error(await web.post(f"/api/sessions/{member}/prompt", {"text": "hi"}), 409, "member_session")
        assert not any(e["type"] == "user/message" for e in handle.agent.session.events)
        assert (await web.post(f"/api/sessions/{member}/interrupt", {})).status_code == 202
        one_line_error(await web.post(f"/api/sessions/{lead}/interrupt", {}), 409, "not_a_member")
        listed = [s["sessionId"] for s in (await web.client.get("/api/sessions")).json()["sessions"]]
        assert listed == [lead]
    finally:
        await handle.dispose()


async def test_a_prompt_to_a_session_owned_by_another_process_is_409(web: Web) -> None:
    sid = (await web.new_session("mine"))["session"]["sessionId"]
    await web.idle(sid)
    await web.host.agent(sid).close()
    lock = web.host.ctx.require(SESSION_PERSISTENCE).find(sid) / "session.lock"
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        one_line_error(
            await web.post(f"/api/sessions/{sid}/prompt", {"text": "steal it"}), 409, "session_owned_elsewhere"
        )
        row = (await web.client.get("/api/sessions")).json()["sessions"][0]
        assert row["sessionId"] == sid and row["status"] == "offline"
    finally:
        os.close(fd)
    accepted = await web.post(f"/api/sessions/{sid}/prompt", {"text": "now it is free"})
    assert accepted.status_code == 202
    await web.idle(sid)
    await stored_log_is_sound(web, sid)
    texts = [
        json.dumps(e["data"]) for e in web.host.ctx.require(SESSIONS).get(sid).events if e["type"] == "user/message"
    ]
    assert not any("steal it" in t for t in texts)


async def test_wrong_token_foreign_host_and_origin_leave_the_server_serving(web: Web) -> None:
    sid = (await web.new_session("keep going"))["session"]["sessionId"]
    await web.idle(sid)
    async with httpx.AsyncClient(base_url=web.server.base) as stranger:
        one_line_error(
            await stranger.post(f"/api/sessions/{sid}/prompt", content='{"text":"x"}', headers=JSON),
            401,
            "unauthorized",
        )
    one_line_error(
        await web.post(f"/api/sessions/{sid}/prompt", {"text": "x"}, headers={**JSON, "Host": "evil.example"}), 421
    )
    one_line_error(
        await web.post(f"/api/sessions/{sid}/prompt", {"text": "x"}, headers={**JSON, "Origin": "http://evil.example"}),
        403,
        "bad_origin",
    )
    assert (await web.post(f"/api/sessions/{sid}/prompt", {"text": "fine"})).status_code == 202
    await web.idle(sid)
    await stored_log_is_sound(web, sid)


@pytest.mark.parametrize("path", ["/api/nope", "/api/sessions/x/nothing"])
async def test_unknown_routes_are_json_404(web: Web, path: str) -> None:
    one_line_error(await web.client.get(path), 404, "not_found")


async def test_wrong_method_is_json_405(web: Web) -> None:
    one_line_error(await web.client.request("DELETE", "/api/info", headers=JSON), 405, "method_not_allowed")


async def test_unknown_presets_are_422_and_nothing_is_created(web: Web) -> None:
    cwd = str(web.workspace)
    one_line_error(await web.post("/api/sessions", {"cwd": cwd, "agentPreset": "wizard"}), 422, "unknown_agent_preset")
    one_line_error(await web.post("/api/sessions", {"cwd": cwd, "permissionPreset": "root"}), 422, "unknown_preset")
    assert (await web.client.get("/api/sessions")).json()["sessions"] == []
    minimal = await web.post("/api/sessions", {"cwd": cwd, "agentPreset": "minimal", "permissionPreset": "read-only"})
    assert minimal.status_code == 201
    assert minimal.json()["session"]["agentPreset"] == "minimal"
    assert minimal.json()["session"]["permissionPreset"] == "read-only"


@pytest.mark.parametrize("script", [[[{"text": "lead"}], [{"text": "member"}]]])
async def test_a_stored_member_session_is_not_resumed_by_the_page(web: Web) -> None:
    lead = (await web.new_session("lead"))["session"]["sessionId"]
    await web.idle(lead)
    ctx = web.host.ctx
    handle = await ctx.require(AGENTS).create(
        CreateAgentOptions(cwd=str(web.workspace), parent_session=lead, origin="subagent", setup=preset_setup(ctx))
    )
    member = handle.agent.id
    handle.agent.followup(user_message("work"))
    await handle.agent.when_idle()
    await handle.dispose()
    one_line_error(await web.put(f"/api/sessions/{member}/permission", {"preset": "read-only"}), 409, "member_session")
    assert ctx.require(AGENTS).get(member) is None
    assert (await web.client.get(f"/api/sessions/{member}")).json()["session"]["status"] == "offline"


@pytest.mark.parametrize("depth", [101, 100_000])
async def test_a_body_nested_too_deep_is_one_400_and_the_server_keeps_serving(web: Web, depth: int) -> None:
    body = b'{"cwd":' + b"[" * depth + b"]" * depth + b"}"
    one_line_error(await web.client.post("/api/sessions", content=body, headers=JSON), 400, "bad_json")
    assert (await web.client.get("/api/info")).status_code == 200


LONE = b"a\\ud800b"


@pytest.mark.parametrize("encoding", ["escape", "utf8-bytes"])
async def test_lone_surrogates_enter_as_replacement_characters_never_a_500_or_a_codec_message(
    web: Web, encoding: str
) -> None:
    """Text enters the web API as every frontend takes it (decision 0017): U+FFFD for the unpaired half."""
    sid = (await web.new_session("first"))["session"]["sessionId"]
    await web.idle(sid)
    lone = LONE if encoding == "escape" else b"a\xed\xa0\x80b"
    cases = [
        (f"/api/sessions/{sid}/prompt", b'{"text": "' + lone + b'"}', "POST", 202),
        ("/api/sessions", b'{"cwd": "/tmp/' + lone + b'"}', "POST", 422),
        (f"/api/sessions/{sid}/title", b'{"title": "' + lone + b'"}', "PUT", 200),
        ("/api/client-errors", b'{"message": "' + lone + b'"}', "POST", 204),
    ]
    for path, body, method, status in cases:
        response = await web.client.request(method, path, content=body, headers=JSON)
        assert response.status_code == status, (path, response.text)
        assert "codec" not in response.text and "surrogates not allowed" not in response.text
    await web.idle(sid)
    events = web.host.ctx.require(SESSIONS).get(sid).events
    expected = "a" + "\ufffd" * (1 if encoding == "escape" else 3) + "b"
    assert [e["data"]["title"] for e in events if e["type"] == "session/title"][-1] == expected
    assert expected in [b["text"] for e in events if e["type"] == "user/message" for b in e["data"]["content"]]
    await stored_log_is_sound(web, sid)


async def test_a_surrogate_in_a_field_name_is_an_unknown_field_with_a_replacement_character(web: Web) -> None:
    response = await web.client.post("/api/client-errors", content=b'{"message": "x", "m\\udc00": "y"}', headers=JSON)
    assert "m\ufffd" in one_line_error(response, 422, "unknown_field")["message"]


@pytest.mark.parametrize(
    "path",
    ["/static/v0.1.0/app.js%00.png", "/static/v0.1.0/%00", "/api/sessions/%00", "/api/sessions/a%0Ab/events"],
)
async def test_control_characters_in_the_path_are_400(web: Web, path: str) -> None:
    one_line_error(await web.client.get(path), 400, "invalid_path")
    assert (await web.client.get("/static/v0.1.0/app.js")).status_code == 200


@pytest.mark.parametrize(
    "query", ["limit=²", "cursor=٣", "limit=" + "9" * 5000, "tail=turns:²", "after=²", "before=¹&limit=¹"]
)
async def test_odd_numbers_in_queries_are_never_500(web: Web, query: str) -> None:
    sid = (await web.new_session("numbers"))["session"]["sessionId"]
    await web.idle(sid)
    listed = await web.client.get(f"/api/sessions?{query}")
    assert listed.status_code == 200
    page = await web.client.get(f"/api/sessions/{sid}/events?{query}")
    if query.startswith("tail="):
        one_line_error(page, 422, "invalid_tail")
    else:
        assert page.status_code == 200


async def test_a_page_error_cannot_forge_log_lines(web: Web, caplog: pytest.LogCaptureFixture) -> None:
    forged = "boom\n2026-01-01 12:00:00 ERROR pydsh.web: forged\r\x1b[31mred\u2028more"
    with caplog.at_level("WARNING", logger="pydsh.web"):
        sent = await web.post("/api/client-errors", {"message": forged, "stack": "at a\nat b\\n"})
        assert sent.status_code == 204
    [record] = [r for r in caplog.records if r.getMessage().startswith("page error:")]
    line = record.getMessage()
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    assert line == (
        "page error: boom\\n2026-01-01 12:00:00 ERROR pydsh.web: forged\\r\\x1b[31mred\\u2028more"
        " | stack: at a\\nat b\\\\n"
    )
