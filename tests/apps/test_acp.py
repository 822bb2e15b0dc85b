"""``pydsh acp`` end to end: a real bridge subprocess driven by the ACP library's client (spec 11 §A.10)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
import pytest
import yaml
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    ClientSessionCapabilities,
    DeniedOutcome,
    EnvVariable,
    HttpHeader,
    HttpMcpServer,
    McpServerStdio,
    RequestPermissionResponse,
)

from pydsh.testing import mcp_server
from pydsh.tools.mcp import normalize_server_name, public_tool_name
from tests import logs

REPO = Path(__file__).resolve().parents[2]
INVALID, INTERNAL, NOT_FOUND = -32602, -32603, -32601
FLASH = '["deepseek-official","deepseek-v4-flash"]'
PRO = '["deepseek-official","deepseek-v4-pro"]'


def patch_file(tmp_path: Path, scripts: list[Any], extra: list[Any] = ()) -> Path:
    """The scripted model behind the shipped DeepSeek catalog (so the default route keeps its 1M window)."""
    row = {"id": "llm-replay", "name": "llm-replay", "config": {"scripts": scripts}}
    path = tmp_path / f"patch-{uuid.uuid4().hex[:8]}.yml"
    path.write_text(yaml.safe_dump([{"insert": [row, *extra]}]))
    return path


def bridge_env(*paths: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), str(REPO)])}


@dataclass
class Recorder:
    """The editor side: records updates and permission requests in arrival order and answers them."""

    answer: str | None = "allow-once"
    seen: list[tuple[str, Any]] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.seen.append(("update", update.model_dump(mode="json", by_alias=True, exclude_none=True)))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.seen.append(("permission", {"toolCallId": tool_call.tool_call_id, "options": options, "meta": kwargs}))
        if self.answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=self.answer, outcome="selected"))

    def observe(self, event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            self.frames.append(event.message)

    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [u for k, u in self.seen if k == "update" and (kind is None or u["sessionUpdate"] == kind)]


@dataclass
class Bridge:
    conn: Any
    proc: asyncio.subprocess.Process
    client: Recorder
    stderr: Path

    async def session(self, cwd: Path) -> str:
        response = await self.conn.new_session(cwd=str(cwd), mcp_servers=[])
        return str(response.session_id)

    async def say(self, session_id: str, text: str) -> Any:
        return await self.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])


@asynccontextmanager
async def bridge(
    tmp_path: Path,
    scripts: list[Any],
    *args: str,
    answer: str | None = "allow-once",
    extra: list[Any] = (),
    paths: tuple[Path, ...] = (),
) -> AsyncIterator[Bridge]:
    patch = patch_file(tmp_path, scripts, extra)
    client = Recorder(answer)
    stderr_path = tmp_path / f"stderr-{uuid.uuid4().hex[:8]}.txt"
    with stderr_path.open("wb") as stderr:
        async with acp.spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "pydsh",
            "acp",
            "--patch",
            str(patch),
            *args,
            env=bridge_env(*paths),
            cwd=tmp_path,
            transport_kwargs={"stderr": stderr, "shutdown_timeout": 30.0},
            observers=[client.observe],
        ) as (conn, proc):
            yield Bridge(conn, proc, client, stderr_path)
    assert proc.returncode == 0, stderr_path.read_text()


async def rejected(call: Any, code: int = INVALID) -> str:
    """The detail of the JSON-RPC error ``call`` ends with (asserting its code and message form)."""
    with pytest.raises(acp.RequestError) as caught:
        await call
    error = caught.value
    assert error.code == code, str(error)
    if code in (INVALID, INTERNAL):
        detail = error.data["detail"]
        prefix = "Invalid params" if code == INVALID else "Internal error"
        assert str(error) == f"{prefix}: {detail}"
        return str(detail)
    return str(error)


def stored_log(session_id: str) -> Path:
    return logs.stored_log(Path(os.environ["DSH_HOME"]) / "sessions", session_id)


def logged(session_id: str) -> list[dict[str, Any]]:
    lines = logs.log_lines(stored_log(session_id))
    return [json.loads(line) for line in lines[1:]]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def outside() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pydsh-acp-", dir=Path.home()))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- A.10 (1) --------------------------------------------------------------------------------


async def test_initialize_authenticate_and_unsupported_methods(tmp_path: Path) -> None:
    async with bridge(tmp_path, []) as b:
        await b.conn.initialize(protocol_version=7)
        answer = next(f for f in b.client.frames if f.get("id") is not None and "result" in f)
        assert answer["result"] == {
            "protocolVersion": 1,
            "agentInfo": {"name": "pydsh-acp", "version": "0.1.0"},
            "agentCapabilities": {
                "mcpCapabilities": {"http": True},
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "sessionCapabilities": {"close": {}, "list": {}, "resume": {}},
            },
            "authMethods": [],
        }
        assert (await b.conn.authenticate(method_id="none")).model_dump(exclude_none=True) == {}
        assert b.client.frames[-1]["result"] == {}
        await rejected(b.conn.load_session(cwd=str(tmp_path), session_id="x", mcp_servers=[]), NOT_FOUND)
        await rejected(b.conn.set_session_mode(session_id="x", mode_id="m"), NOT_FOUND)


# -- A.10 (2) --------------------------------------------------------------------------------


async def test_new_session_errors_and_success(tmp_path: Path, workspace: Path) -> None:
    async with bridge(tmp_path, []) as b:
        assert await rejected(b.conn.new_session(cwd="work", mcp_servers=[])) == "cwd must be an absolute path: work"
        extra = b.conn.new_session(cwd=str(workspace), additional_directories=["/x"], mcp_servers=[])
        assert await rejected(extra) == "additionalDirectories is not supported"
        sse = acp.schema.SseMcpServer(type="sse", name="s", url="http://127.0.0.1:1/sse", headers=[])
        bad = b.conn.new_session(cwd=str(workspace), mcp_servers=[sse])
        assert await rejected(bad) == "mcpServers[0] transport sse is not supported"
        response = await b.conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert uuid.UUID(response.session_id).version == 4
        header = json.loads(logs.log_lines(stored_log(response.session_id))[0])
        assert header["cwd"] == str(workspace)
        options = {o.root.id if hasattr(o, "root") else o.id: o for o in response.config_options}
        assert set(options) == {"model", "reasoning_effort"}


# -- A.10 (3) --------------------------------------------------------------------------------


SESSION_CAPABLE = ClientCapabilities(session=ClientSessionCapabilities())
"""What a client whose library takes ``usage_update`` advertises (ACP libraries from 1.0 on)."""


async def test_text_turn_updates_arrive_before_end_turn(tmp_path: Path, workspace: Path) -> None:
    async with bridge(tmp_path, [{"reasoning": "Let me think.", "text": "Hello from pydsh."}]) as b:
        await b.conn.initialize(protocol_version=1, client_capabilities=SESSION_CAPABLE)
        sid = await b.session(workspace)
        b.client.frames.clear()
        response = await b.say(sid, "hi")
        assert response.stop_reason == "end_turn"
        kinds = [
            f["params"]["update"]["sessionUpdate"] if f.get("method") == "session/update" else "answer"
            for f in b.client.frames
        ]
        assert kinds == ["agent_thought_chunk", "agent_message_chunk", "usage_update", "answer"]
        thought, message, usage = (f["params"]["update"] for f in b.client.frames[:3])
        assert thought["content"] == {"type": "text", "text": "Let me think."}
        assert message["content"] == {"type": "text", "text": "Hello from pydsh."}
        assert thought["messageId"] == message["messageId"]
        assert usage["size"] == 1000000
        assert usage["used"] > 0
        assert b.client.frames[-1]["result"] == {"stopReason": "end_turn"}


async def test_a_client_that_advertises_no_session_capabilities_gets_no_usage_updates(
    tmp_path: Path, workspace: Path
) -> None:
    """Older ACP libraries (``@zed-industries/agent-client-protocol`` 0.4) reject every ``usage_update``."""
    async with bridge(tmp_path, [{"text": "Hello."}]) as b:
        await b.conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        sid = await b.session(workspace)
        assert (await b.say(sid, "hi")).stop_reason == "end_turn"
        assert [u["sessionUpdate"] for u in b.client.updates()] == ["agent_message_chunk"]


async def test_prompt_content_admission(tmp_path: Path, workspace: Path) -> None:
    async with bridge(tmp_path, [{"text": "seen"}]) as b:
        sid = await b.session(workspace)
        cases = [
            (acp.image_block("aGk=", "image/png"), 'Model "deepseek-v4-flash" does not support image input.'),
            (acp.audio_block("aGk=", "audio/wav"), "audio prompt content is not supported"),
            (
                acp.resource_block(acp.embedded_text_resource("file:///a", "x")),
                "embedded resource prompt content is not supported",
            ),
        ]
        for block, detail in cases:
            assert await rejected(b.conn.prompt(session_id=sid, prompt=[acp.text_block("look"), block])) == detail
        for empty in ([], [acp.text_block("  \n ")]):
            assert await rejected(b.conn.prompt(session_id=sid, prompt=empty)) == "empty prompt"
        link = acp.resource_link_block(name='a "b"', uri="file:///x.py")
        blocks = [acp.text_block("see"), link, acp.text_block("now")]
        assert (await b.conn.prompt(session_id=sid, prompt=blocks)).stop_reason == "end_turn"
    prompts = [e["data"] for e in logged(sid) if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"]
    assert [p["content"] for p in prompts] == [
        [{"type": "text", "text": 'see\n[resource_link name="a \\"b\\"" uri="file:///x.py"]\nnow'}]
    ]


# -- A.10 (4) --------------------------------------------------------------------------------


async def test_tool_turn_reports_calls_and_results(tmp_path: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    calls = [
        {"name": "read", "arguments": {"file_path": "notes.txt"}},
        {"name": "read", "arguments": {"file_path": "missing.txt"}},
    ]
    async with bridge(tmp_path, [{"tool_calls": calls}, {"text": "done"}]) as b:
        sid = await b.session(workspace)
        assert (await b.say(sid, "read them")).stop_reason == "end_turn"
        starts = b.client.updates("tool_call")
        assert [s["rawInput"] for s in starts] == [{"file_path": "notes.txt"}, {"file_path": "missing.txt"}]
        assert [(s["kind"], s["status"], s["title"]) for s in starts] == [
            ("read", "in_progress", "Read notes.txt"),
            ("read", "in_progress", "Read missing.txt"),
        ]
        assert [s["locations"] for s in starts] == [
            [{"path": str(workspace / "notes.txt")}],
            [{"path": str(workspace / "missing.txt")}],
        ]
        results = {u["toolCallId"]: u for u in b.client.updates("tool_call_update")}
        ok, failed = (results[s["toolCallId"]] for s in starts)
        assert ok["status"] == "completed"
        assert "alpha" in ok["content"][0]["content"]["text"]
        assert failed["status"] == "failed"
        order = [u["sessionUpdate"] for u in b.client.updates()]
        assert order.index("tool_call") < order.index("tool_call_update")


# -- A.10 (5) --------------------------------------------------------------------------------


def escalated_write(target: Path) -> dict[str, Any]:
    args = {"file_path": str(target), "content": "x", "sandbox_permissions": "danger-full-access"}
    return {"name": "write", "arguments": {**args, "justification": "the user asked for it"}}


@pytest.mark.parametrize(
    ("answer", "written", "text"),
    [
        ("allow-once", True, None),
        (
            "reject-once",
            False,
            'the user rejected escalating this operation to "danger-full-access"; it stays denied, '
            "so stop and explain instead of working around it",
        ),
        (None, False, 'approval for escalating to "danger-full-access" was cancelled'),
    ],
)
async def test_escalation_asks_the_editor(
    tmp_path: Path, workspace: Path, outside: Path, answer: str | None, written: bool, text: str | None
) -> None:
    target = outside / "f.txt"
    async with bridge(tmp_path, [{"tool_calls": [escalated_write(target)]}, {"text": "ok"}], answer=answer) as b:
        sid = await b.session(workspace)
        assert (await b.say(sid, "write it")).stop_reason == "end_turn"
        kinds = [k if k == "permission" else u["sessionUpdate"] for k, u in b.client.seen]
        assert kinds.index("tool_call") < kinds.index("permission") < kinds.index("tool_call_update")
        asked = next(u for k, u in b.client.seen if k == "permission")
        assert asked["toolCallId"] == b.client.updates("tool_call")[0]["toolCallId"]
        assert [(o.option_id, o.name, o.kind) for o in asked["options"]] == [
            ("allow-once", "Allow once", "allow_once"),
            ("reject-once", "Reject", "reject_once"),
        ]
        assert asked["meta"]["reason"].startswith("escalate sandbox to danger-full-access: the user asked")
        result = b.client.updates("tool_call_update")[0]
        assert target.exists() == written
        if text is not None:
            assert result["status"] == "failed"
            assert result["content"][0]["content"]["text"] == f"Error: {text}"


# -- A.10 (6) --------------------------------------------------------------------------------


async def test_cancel_second_prompt_auth_failure_and_max_tokens(tmp_path: Path, workspace: Path) -> None:
    ready = tmp_path / "ready"
    scripts = [
        [{"hang": {"readyFile": str(ready)}}, {"text": "after the cancel"}],
        [{"throw": {"code": "AUTH", "message": "bad key", "status": 401}}],
        [{"text": "cut", "stop": "max-tokens"}],
    ]
    async with bridge(tmp_path, scripts) as b:
        sid = await b.session(workspace)
        pending = asyncio.ensure_future(b.say(sid, "hang"))
        while not ready.exists():
            assert not pending.done()
            await asyncio.sleep(0.02)
        second = await rejected(b.say(sid, "again"))
        assert second == "a prompt is already in flight for this session"
        await b.conn.cancel(session_id=sid)
        assert (await pending).stop_reason == "cancelled"
        assert (await b.say(sid, "go on")).stop_reason == "end_turn"

        failing = await b.session(workspace)
        assert await rejected(b.say(failing, "x"), INTERNAL) == "turn failed: bad key"
        capped = await b.session(workspace)
        assert (await b.say(capped, "x")).stop_reason == "max_tokens"


# -- A.10 (7) --------------------------------------------------------------------------------


async def test_list_resume_and_close(tmp_path: Path, workspace: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    scripts = [[{"text": "one"}, {"text": "again"}], [{"text": "two"}], [{"text": "three"}]]
    async with bridge(tmp_path, scripts) as b:
        first, second = await b.session(workspace), await b.session(workspace)
        third = await b.session(other)
        for sid in (first, second, third):
            await b.say(sid, "hi")
        assert (await b.conn.list_sessions()).sessions == []
        await b.conn.close_session(session_id=first)
        await b.conn.close_session(session_id=second)
        await b.conn.close_session(session_id=third)
        assert await rejected(b.conn.close_session(session_id=first)) == f"unknown session: {first}"
        assert await rejected(b.say(first, "x")) == f"unknown session: {first}"

        listed = await b.conn.list_sessions(cwd=str(workspace))
        assert {s.session_id for s in listed.sessions} == {first, second}
        assert all(s.cwd == str(workspace) for s in listed.sessions)
        everything = (await b.conn.list_sessions()).sessions
        assert [s.session_id for s in everything][:1] == [third]
        assert await rejected(b.conn.list_sessions(cwd="rel")) == "cwd must be an absolute path: rel"
        assert await rejected(b.conn.list_sessions(cursor="bm90IGEgY3Vyc29y")) == "session/list cursor is invalid"

        await b.conn.resume_session(cwd=str(workspace), session_id=first, mcp_servers=[])
        assert (await b.say(first, "continue")).stop_reason == "end_turn"
        again = b.conn.resume_session(cwd=str(workspace), session_id=first, mcp_servers=[])
        assert await rejected(again) == f"session is already active: {first}"
        ghost = b.conn.resume_session(cwd=str(workspace), session_id="ghost", mcp_servers=[])
        assert await rejected(ghost) == "session is not resumable: ghost"
        moved = b.conn.resume_session(cwd=str(other), session_id=second, mcp_servers=[])
        assert await rejected(moved) == f"session cwd does not match: {other}"
        twice = [b.conn.resume_session(cwd=str(workspace), session_id=second, mcp_servers=[]) for _ in range(2)]
        outcomes = await asyncio.gather(*twice, return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, acp.RequestError)]
        assert [r.data["detail"] for r in refused] == [f"session is already active: {second}"]
        await b.conn.close_session(session_id=first)
        await b.conn.resume_session(cwd=str(workspace), session_id=first, mcp_servers=[])


async def test_list_pages_with_cursors_and_skips_subagents(tmp_path: Path, workspace: Path) -> None:
    scripts = [[{"text": str(n)}] for n in range(5)]
    async with bridge(tmp_path, scripts) as b:
        ids = [await b.session(workspace) for _ in range(5)]
        for sid in ids:
            await b.conn.close_session(session_id=sid)
        home = Path(os.environ["DSH_HOME"])
        child = logs.log_lines(stored_log(ids[0]))
        header = {**json.loads(child[0]), "id": "child", "origin": "subagent", "parentSession": ids[0]}
        child_dir = stored_log(ids[0]).parent.parent / "child"
        child_dir.mkdir()
        (child_dir / "session.v4.jsonl").write_text("\n".join([json.dumps(header), *child[1:]]) + "\n")
        assert home.exists()
    page_size = tmp_path / "page.yml"
    page_size.write_text(yaml.safe_dump([{"id": "acp", "name": "acp", "config": {"sessionListPageSize": 2}}]))
    async with bridge(tmp_path, [], "--patch", str(page_size)) as b:
        pages, cursor = [], None
        while True:
            page = await b.conn.list_sessions(cursor=cursor)
            pages.append([s.session_id for s in page.sessions])
            cursor = page.next_cursor
            if cursor is None:
                break
            created, last = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            assert last == pages[-1][-1] and type(created) is int
        assert [len(p) for p in pages] == [2, 2, 1]
        flat = [sid for page in pages for sid in page]
        assert sorted(flat) == sorted(ids)
        headers = {sid: json.loads(logs.log_lines(stored_log(sid))[0]) for sid in flat}
        keys = [(-headers[s]["createdAt"], s.encode()) for s in flat]
        assert keys == sorted(keys)


# -- A.10 (8) --------------------------------------------------------------------------------


async def test_config_options_select_the_next_prompts_route(tmp_path: Path, workspace: Path) -> None:
    async with bridge(tmp_path, [{"text": "on pro"}, {"text": "effort"}]) as b:
        response = await b.conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = response.session_id
        model, effort = (o.model_dump(by_alias=True, exclude_none=True) for o in response.config_options)
        assert model["currentValue"] == FLASH
        assert model["options"][0]["group"] == "deepseek-official"
        assert effort["currentValue"] == "high"
        assert [o["value"] for o in effort["options"]] == ["off", "low", "high", "max"]

        set_option = b.conn.set_config_option
        changed = await set_option(config_id="model", session_id=sid, value=PRO)
        assert changed.config_options[0].current_value == PRO
        assert await rejected(set_option(config_id="model", session_id=sid, value='["x","y"]')) == (
            'unknown model option: ["x","y"]'
        )
        assert await rejected(set_option(config_id="reasoning_effort", session_id=sid, value="huge")) == (
            "unknown reasoning effort for deepseek-official/deepseek-v4-pro: huge"
        )
        assert await rejected(set_option(config_id="speed", session_id=sid, value="x")) == (
            "unknown session config option: speed"
        )
        assert await rejected(set_option(config_id="model", session_id=sid, value=True)) == (
            "model requires a select value"
        )
        await b.say(sid, "first")
        await set_option(config_id="reasoning_effort", session_id=sid, value="low")
        await b.say(sid, "second")
    headers = [e["data"]["header"]["config"] for e in logged(sid) if e["type"] == "request/header"]
    assert [(h["model"], h.get("reasoningEffort")) for h in headers] == [
        ("deepseek-v4-pro", "high"),
        ("deepseek-v4-pro", "low"),
    ]


async def test_a_new_route_reaches_the_editor_as_a_config_option_update(tmp_path: Path, workspace: Path) -> None:
    scripts = [{"tool_calls": [{"name": "add_route", "arguments": {}}]}, {"text": "added"}]
    async with bridge(tmp_path, scripts, extra=[{"id": "late-route", "name": "tests.apps.late_route"}]) as b:
        sid = await b.session(workspace)
        assert (await b.say(sid, "add it")).stop_reason == "end_turn"
        (update,) = b.client.updates("config_option_update")
        model = update["configOptions"][0]
        assert [g["group"] for g in model["options"]] == ["deepseek-official", "late"]
        assert model["options"][1] == {
            "group": "late",
            "name": "Late",
            "options": [{"value": '["late","late-1"]', "name": "Late One"}],
        }
        chosen = await b.conn.set_config_option(config_id="model", session_id=sid, value='["late","late-1"]')
        assert [o.id for o in chosen.config_options] == ["model"]


async def test_command_line_route_is_the_route_of_new_sessions(tmp_path: Path, workspace: Path) -> None:
    async with bridge(tmp_path, [], "--provider", "deepseek-official", "--model", "deepseek-v4-pro") as b:
        response = await b.conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert response.config_options[0].current_value == PRO


# -- A.10 (9) --------------------------------------------------------------------------------


async def test_stdin_eof_with_a_prompt_in_flight_exits_zero_and_flushes(tmp_path: Path, workspace: Path) -> None:
    ready = tmp_path / "ready"
    async with bridge(tmp_path, [{"hang": {"readyFile": str(ready)}}]) as b:
        sid = await b.session(workspace)
        pending = asyncio.ensure_future(b.say(sid, "hang"))
        while not ready.exists():
            await asyncio.sleep(0.02)
        assert b.proc.stdin is not None
        b.proc.stdin.close()
        assert await asyncio.wait_for(b.proc.wait(), 60) == 0
        with pytest.raises(ConnectionError):
            await pending
    kinds = [e["type"] for e in logged(sid)]
    assert kinds.count("turn/start") == kinds.count("turn/end") == 1
    end = next(e for e in logged(sid) if e["type"] == "turn/end")
    assert end["data"]["reason"]["kind"] == "aborted"


# -- A.8: MCP servers declared by the client -------------------------------------------------


def stdio_server(name: str = "my tools!", **fields: Any) -> McpServerStdio:
    spec: dict[str, Any] = {"name": name, "command": sys.executable, "args": [mcp_server.__file__], "env": []}
    return McpServerStdio(**{**spec, **fields})


def http_server(url: str, headers: list[HttpHeader] = ()) -> HttpMcpServer:
    return HttpMcpServer(type="http", name="web", url=url, headers=list(headers))


async def test_client_declared_mcp_server_errors(tmp_path: Path, workspace: Path) -> None:
    cases = [
        ([stdio_server(command="python3")], "mcpServers[0].command must be an absolute path"),
        (
            [stdio_server(), stdio_server("b", env=[EnvVariable(name="A=B", value="x")])],
            "mcpServers[1].env contains an invalid environment entry",
        ),
        (
            [stdio_server(env=[EnvVariable(name="A", value="1"), EnvVariable(name="A", value="2")])],
            "mcpServers[0].env contains duplicate name: A",
        ),
        ([http_server("ftp://127.0.0.1/mcp")], "mcpServers[0].url must be an absolute HTTP(S) URL"),
        ([http_server("/mcp")], "mcpServers[0].url must be an absolute HTTP(S) URL"),
        (
            [
                http_server(
                    "http://127.0.0.1:1/mcp", [HttpHeader(name="X-A", value="1"), HttpHeader(name="x-a", value="2")]
                )
            ],
            "mcpServers[0].headers contains duplicate name: x-a",
        ),
        (
            [http_server("http://127.0.0.1:1/mcp", [HttpHeader(name="Bad Name", value="1")])],
            "mcpServers[0].headers contains an invalid header entry",
        ),
        ([stdio_server(" ")], "mcpServers contains an invalid server name"),
        ([stdio_server("a\x07b")], "mcpServers contains an invalid server name"),
        (
            [stdio_server("my tools!"), stdio_server("my tools!")],
            f"mcpServers contains duplicate normalized name: {normalize_server_name('my tools!')}",
        ),
    ]
    async with bridge(tmp_path, []) as b:
        for servers, detail in cases:
            assert await rejected(b.conn.new_session(cwd=str(workspace), mcp_servers=servers)) == detail
        failing = stdio_server("broken", command="/nonexistent/mcp-server")
        startup = await rejected(b.conn.new_session(cwd=str(workspace), mcp_servers=[failing]), INTERNAL)
        assert "mcp-client(broken): initial connection or tool synchronization failed" in startup
        assert (await b.conn.list_sessions()).sessions == []


async def test_client_declared_mcp_servers_without_the_extra_warn_once_and_the_session_runs(
    tmp_path: Path, workspace: Path
) -> None:
    hidden = tmp_path / "no-mcp"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules['mcp'] = None\n")
    async with bridge(tmp_path, [{"text": "no tools"}], paths=(hidden,)) as b:
        first = await b.conn.new_session(cwd=str(workspace), mcp_servers=[stdio_server()])
        await b.conn.new_session(cwd=str(workspace), mcp_servers=[stdio_server("other")])
        answer = await b.conn.prompt(session_id=first.session_id, prompt=[acp.text_block("hi")])
        assert answer.stop_reason == "end_turn"
    stderr = b.stderr.read_text()
    assert stderr.count("the editor's MCP servers are not mounted") == 1, stderr
    assert "pip install 'pydsh[mcp]'" in stderr


async def test_client_declared_mcp_servers_mount_per_session(tmp_path: Path, workspace: Path) -> None:
    web = subprocess.Popen([sys.executable, mcp_server.__file__, "--http"], stdout=subprocess.PIPE, text=True)
    try:
        assert web.stdout is not None
        port = int(web.stdout.readline().split()[1])
        local = public_tool_name(normalize_server_name("my tools!"), "echo")
        remote = public_tool_name("web", "echo")
        calls = [
            {"name": local, "arguments": {"text": "over stdio"}},
            {"name": remote, "arguments": {"text": "over http"}},
        ]
        scripts = [[{"tool_calls": calls}, {"text": "both answered"}], [{"tool_calls": [calls[0]]}, {"text": "x"}]]
        async with bridge(tmp_path, scripts) as b:
            header = HttpHeader(name="X-Test", value="1")
            servers = [stdio_server(), http_server(f"http://127.0.0.1:{port}/mcp", [header])]
            first = (await b.conn.new_session(cwd=str(workspace), mcp_servers=servers)).session_id
            assert (await b.say(first, "use them")).stop_reason == "end_turn"
            results = [u["content"][0]["content"]["text"] for u in b.client.updates("tool_call_update")]
            assert results == ["over stdio", "over http"]
            plain = await b.session(workspace)
            assert (await b.say(plain, "no servers here")).stop_reason == "end_turn"
            unknown = b.client.updates("tool_call_update")[-1]
            assert unknown["status"] == "failed"
            assert local in unknown["content"][0]["content"]["text"]
    finally:
        web.terminate()
        web.wait(10)


# -- bad input and the process contract ------------------------------------------------------


def raw_bridge(
    tmp_path: Path, lines: list[str], extra: list[Any] = (), env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    patch = patch_file(tmp_path, [], extra)
    return subprocess.run(
        [sys.executable, "-m", "pydsh", "acp", "--patch", str(patch)],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        env=env or bridge_env(),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


def test_malformed_frames_get_errors_and_the_bridge_keeps_serving(tmp_path: Path) -> None:
    lines = [
        "{not json",
        "[1, 2]",
        '{"jsonrpc": "2.0", "id": 1, "method": 5}',
        '{"jsonrpc": "1.0", "id": 2, "method": "initialize", "params": {"protocolVersion": 1}}',
        '{"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": [1]}',
        '{"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {}}',
        '{"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": 7, "mcpServers": []}}',
        '{"jsonrpc": "2.0", "method": "session/cancel", "params": {"nope": true}}',
        '{"jsonrpc": "2.0", "id": 6, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}',
        '{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}',
    ]
    result = raw_bridge(tmp_path, lines)
    assert result.returncode == 0, result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    errors = [(f["id"], f["error"]["code"]) for f in frames if "error" in f]
    assert errors == [
        (None, -32700),
        (None, -32600),
        (1, -32600),
        (2, -32600),
        (3, -32600),
        (4, -32602),
        (5, -32602),
        (6, -32602),
    ]
    assert frames[-1]["id"] == 7
    assert frames[-1]["result"]["protocolVersion"] == 1


def test_stdout_carries_only_protocol_frames(tmp_path: Path) -> None:
    row = {"id": "stray-output", "name": "tests.apps.stray_output"}
    lines = ['{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}']
    result = raw_bridge(tmp_path, lines, [row])
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == [1]
    for text in ("stray print", "stray fd write", "stray log"):
        assert text in result.stderr


def test_text_left_buffered_in_stdout_before_the_bridge_starts_goes_to_stderr(tmp_path: Path) -> None:
    row = {"id": "buffered-output", "name": "tests.apps.buffered_output"}
    lines = ['{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}']
    buffered = {k: v for k, v in bridge_env().items() if k != "PYTHONUNBUFFERED"}
    result = raw_bridge(tmp_path, lines, [row], env=buffered)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == [1]
    assert "buffered before the frames" in result.stderr


async def test_a_closed_delivery_queue_never_holds_up_a_drain() -> None:
    from pydsh.apps.acp.updates import DeliveryQueue

    gate, sent = asyncio.Event(), []

    async def send(update: Any) -> None:
        await gate.wait()
        sent.append(update)

    queue = DeliveryQueue(send, lambda item, exc: None)
    queue.put("a")
    queue.put("b")
    await asyncio.sleep(0)
    queue.close()
    await asyncio.wait_for(queue.drain(), 30)
    queue.put("c")
    gate.set()
    await asyncio.sleep(0)
    assert sent == []


def test_missing_extra_exits_two_naming_the_install_command(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['acp'] = None; from pydsh.apps.cli import main; sys.exit(main(['acp']))"
    result = subprocess.run(
        [sys.executable, "-c", hide], capture_output=True, text=True, env=bridge_env(), cwd=tmp_path, check=False
    )
    assert result.returncode == 2
    assert "pip install 'pydsh[acp]'" in result.stderr
    assert result.stdout == ""


def test_the_acp_library_loads_only_when_the_row_activates() -> None:
    probe = "import sys, pydsh.apps.acp, pydsh.apps.cli, pydsh.apps.sdk; print('acp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=bridge_env(), check=True)
    assert result.stdout.strip() == "False"


def test_a_frame_nested_too_deep_is_a_parse_error_and_the_bridge_keeps_serving(tmp_path: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    lines = [deep, '{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}']
    result = raw_bridge(tmp_path, lines)
    assert result.returncode == 0, result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    assert frames[0]["error"]["code"] == -32700
    assert frames[0]["error"]["data"]["detail"] == "the frame nests deeper than 100 levels"
    assert frames[-1]["id"] == 7 and frames[-1]["result"]["protocolVersion"] == 1
