"""The public embedding API: ``pydsh.open_host``, ``pydsh.testing.scripted_host`` and the README example."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import pydsh
import pydsh.testing
from tests.logs import stored_logs

ROOT = Path(__file__).resolve().parent.parent
READ = {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    (directory / "a.txt").write_text("alpha\n")
    return directory


def readme_blocks() -> list[str]:
    """The Python code blocks of the README's Embedding section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Embedding") :]
    section = section[: section.index("\n## ")]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def kinds(events: list[Any]) -> list[str]:
    return [e.type if isinstance(e, pydsh.SessionEvent) else type(e).__name__ for e in events]


# -- the README -----------------------------------------------------------------------------


async def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both README blocks run as written: the test block, and ``main()`` with a scripted home patch."""
    program, test = readme_blocks()
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(program, "README.md (program)", "exec"), namespace)
    exec(compile(test, "README.md (test)", "exec"), namespace)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        await namespace["test_ask"](tmp_path)
    assert out.getvalue() == '-> glob {"pattern":"*.py"}\nOne: app.py.\n[completed]\n'

    home = Path(os.environ["DSH_HOME"])
    script = [
        {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*.py"}}]},
        {"text": "One: app.py."},
        {"text": "app.py, the only one."},
    ]
    (home / "patch.yml").write_text(yaml.safe_dump(pydsh.testing.scripted_patch(script)))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        await namespace["main"]()
    printed = out.getvalue().splitlines()
    assert printed[:3] == ['-> glob {"pattern":"*.py"}', "One: app.py.", "[completed]"]
    assert printed[3].startswith("app.py, the only one. {'inputTokens': ")
    assert len(stored_logs(home / "sessions")) == 1


# -- open and close -------------------------------------------------------------------------


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def test_open_close_unwinds_everything(workspace: Path) -> None:
    home_before = os.environ["DSH_HOME"]
    tasks_before = asyncio.all_tasks()
    fds_before = open_fds()
    host = pydsh.testing.scripted_host([READ, {"text": "done"}], cwd=workspace)
    async with host:
        temporary = Path(os.environ["DSH_HOME"])
        assert temporary != Path(home_before) and temporary.is_dir()
        agent = await host.create_agent()
        result = await agent.run("read it")
        assert result.final_response == "done"
        assert host.agents == [agent] and agent.status == "idle"
    assert host.agents == []
    assert os.environ["DSH_HOME"] == home_before
    assert not temporary.exists()
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == tasks_before
    assert open_fds() == fds_before
    assert list(Path(home_before).iterdir()) == []
    await host.close()
    with pytest.raises(pydsh.HostError, match="the host is not open"):
        host.ctx  # noqa: B018


async def test_close_interrupts_a_running_turn_and_keeps_the_log(workspace: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with pydsh.testing.scripted_host([{"hang": True}], cwd=workspace, dsh_home=home) as host:
        agent = await host.create_agent()
        run = agent.prompt("wait forever")
        first = await anext(run)
        assert first.type == "agent/inbox/spliced"  # type: ignore[union-attr]
        await run.aclose()
        while agent.status != "running" or not any(e["type"] == "step/start" for e in agent.events):
            await asyncio.sleep(0.01)
    assert agent.events[-1]["type"] == "turn/end"
    assert agent.events[-1]["data"]["reason"]["kind"] == "aborted"
    assert len(stored_logs(home)) == 1


# -- streaming ------------------------------------------------------------------------------


async def test_prompt_streams_events_in_order(workspace: Path) -> None:
    script = [READ, {"reasoning": "It is short.", "text": "It says alpha."}]
    async with pydsh.testing.scripted_host(script, cwd=workspace) as host:
        agent = await host.create_agent()
        async with agent.prompt("What does a.txt say?") as run:
            events = [event async for event in run]
        host.assert_consumed()
    order = kinds(events)
    assert order[0] == "agent/inbox/spliced" and order[-1] == "turn/end"
    for earlier, later in [
        ("turn/start", "user/message"),
        ("user/message", "tool/call"),
        ("tool/call", "tool/result"),
        ("tool/result", "ReasoningDelta"),
        ("ReasoningDelta", "TextDelta"),
        ("TextDelta", "turn/end"),
    ]:
        assert order.index(earlier) < order.index(later), (earlier, later, order)
    call = next(e for e in events if isinstance(e, pydsh.ToolCall))
    result = next(e for e in events if isinstance(e, pydsh.ToolResult))
    assert (call.name, json.loads(call.arguments)) == ("read", {"file_path": "a.txt"})
    assert result.call_id == call.call_id and "alpha" in result.text and not result.is_error
    deltas = [e for e in events if isinstance(e, pydsh.TextDelta)]
    final = [e for e in events if isinstance(e, pydsh.AssistantMessage)][-1]
    assert "".join(d.text for d in deltas) == final.text == "It says alpha."
    assert order.index("TextDelta") < events.index(final)
    end = events[-1]
    assert isinstance(end, pydsh.TurnEnd) and end.finish_reason == "completed" and end.error is None
    assert run.result is not None
    assert run.result.final_response == "It says alpha."
    assert run.result.finish_reason == "completed"
    assert run.result.session_id == agent.session_id
    assert run.result.usage["outputTokens"] > 0
    assert [e["seq"] for e in run.result.events] == [e.seq for e in events if isinstance(e, pydsh.SessionEvent)]


async def test_error_turn_reports_its_failure(workspace: Path) -> None:
    failure = {"code": "AUTH", "message": "bad key"}
    async with pydsh.testing.scripted_host([{"error": failure}], cwd=workspace) as host:
        agent = await host.create_agent()
        result = await agent.run("hello")
    assert result.finish_reason == "error"
    assert result.error is not None and (result.error["code"], result.error["message"]) == ("AUTH", "bad key")


# -- resume ---------------------------------------------------------------------------------


async def test_resume_continues_the_same_session(workspace: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = [{"text": "first"}, {"text": "second"}, {"text": "third"}]
    async with pydsh.testing.scripted_host(script, cwd=workspace, dsh_home=home) as host:
        agent = await host.create_agent(session_id="embed-1")
        assert (await agent.run("one")).final_response == "first"
        await agent.close()
        with pytest.raises(pydsh.HostError, match='agent "embed-1" is closed'):
            agent.prompt("again")
        with pytest.raises(pydsh.HostError, match='session "embed-1" already exists; continue it with resume_agent'):
            await host.create_agent(session_id="embed-1")
        with pytest.raises(pydsh.HostError, match="session id is too long"):
            await host.create_agent(session_id="x" * 300)
        resumed = await host.resume_agent("embed-1")
        assert resumed.session_id == "embed-1"
        assert (await resumed.run("two")).session_id == "embed-1"
    async with pydsh.testing.scripted_host(
        [{"text": "after restart"}], cwd=workspace, dsh_home=home, patches=[]
    ) as host:
        again = await host.resume_agent("embed-1")
        result = await again.run("three")
        with pytest.raises(pydsh.HostError, match='session "nonesuch" not found'):
            await host.resume_agent("nonesuch")
    assert result.session_id == "embed-1" and result.final_response == "after restart"
    prompts = [e for e in again.events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"]
    assert [p["data"]["content"][0]["text"] for p in prompts] == ["one", "two", "three"]


# -- transport ------------------------------------------------------------------------------


def messages_sse(text: str) -> str:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def chat_sse(text: str) -> str:
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


async def test_transport_reaches_both_http_adapters(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        body = messages_sse("via messages") if request.url.path.endswith("/messages") else chat_sse("via chat")
        return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})

    local = {
        "id": "local",
        "baseURL": "http://models.invalid/v1",
        "apiKeyEnv": None,
        "models": [{"id": "m", "contextWindow": 32768}],
    }
    patch = [{"id": "llm-openai-compat", "config": {"providers": [local]}}]
    async with pydsh.open_host(patches=[patch], cwd=workspace, transport=httpx.MockTransport(handler)) as host:
        deepseek = await host.create_agent()
        chat = await host.create_agent(provider="local", model="m")
        first = await deepseek.run("hello")
        second = await chat.run("hello")
    assert (first.finish_reason, first.final_response) == ("completed", "via messages")
    assert (second.finish_reason, second.final_response) == ("completed", "via chat")
    assert seen == ["https://api.deepseek.com/anthropic/v1/messages", "http://models.invalid/v1/chat/completions"]


# -- keyless, lazy, errors ------------------------------------------------------------------


async def test_scripted_host_needs_no_keys(workspace: Path) -> None:
    assert not any(name.endswith("API_KEY") for name in os.environ)
    async with pydsh.testing.scripted_host([{"text": "offline"}], cwd=workspace) as host:
        result = await (await host.create_agent()).run("hi")
        host.assert_consumed()
    assert (result.final_response, result.finish_reason) == ("offline", "completed")


async def test_unconsumed_script_fails_the_check(workspace: Path) -> None:
    async with pydsh.testing.scripted_host([{"text": "a"}, {"text": "b"}], cwd=workspace) as host:
        await (await host.create_agent()).run("hi")
        with pytest.raises(AssertionError, match="script 1 consumed 1 of 2 model calls"):
            host.assert_consumed()


def test_import_pydsh_loads_nothing_else() -> None:
    code = "import sys, pydsh; print(sorted(m for m in sys.modules if m.startswith('pydsh')))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "['pydsh']"
    assert pydsh.open_host.__module__ == "pydsh.host.host"
    assert set(pydsh.__all__) <= set(dir(pydsh))
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        pydsh.nonesuch  # type: ignore[attr-defined]  # noqa: B018


async def test_bad_input_is_one_clear_error(workspace: Path, tmp_path: Path) -> None:
    with pytest.raises(
        pydsh.HostError, match=r'^unknown profile "nonesuch" \(known templates: acp, embed, headless, sdk'
    ):
        await pydsh.open_host("nonesuch").start()
    with pytest.raises(pydsh.HostError, match='patch 1: row "x" has unknown field "colour"'):
        await pydsh.open_host(patches=[[{"insert": [{"id": "x", "name": "x", "colour": 1}]}]]).start()
    bad_config = [{"id": "llm-openai-compat", "config": {"nonesuch": 1}}]
    with pytest.raises(pydsh.HostError, match=r'row "llm-openai-compat".*nonesuch: Extra inputs are not permitted'):
        await pydsh.open_host(patches=[bad_config]).start()
    with pytest.raises(ValueError, match="entry 1: unknown scripted entry keys"):
        pydsh.testing.scripted_host([{"txt": "typo"}])
    async with pydsh.testing.scripted_host([], cwd=workspace, dsh_home=tmp_path / "a") as host:
        with pytest.raises(pydsh.HostError, match="is not an existing directory"):
            await host.create_agent(cwd=tmp_path / "missing")
        with pytest.raises(pydsh.HostError, match="another open host uses DSH_HOME"):
            await pydsh.testing.scripted_host([], dsh_home=tmp_path / "b").start()
    assert os.environ["DSH_HOME"] != str(tmp_path / "a")


async def test_cancel_ends_the_run_aborted(workspace: Path) -> None:
    async with pydsh.testing.scripted_host([{"hang": True}], cwd=workspace) as host:
        agent = await host.create_agent()
        events = []
        async with agent.prompt("wait") as run:
            async for event in run:
                events.append(event)
                if isinstance(event, pydsh.SessionEvent) and event.type == "step/start":
                    agent.cancel()
    end = events[-1]
    assert isinstance(end, pydsh.TurnEnd) and end.finish_reason == "aborted"
    assert run.result is not None and run.result.finish_reason == "aborted"


async def test_scripted_hosts_open_at_once_share_one_temporary_home(workspace: Path) -> None:
    before = os.environ["DSH_HOME"]
    first = await pydsh.testing.scripted_host([{"text": "one"}], cwd=workspace).start()
    home = Path(os.environ["DSH_HOME"])
    async with pydsh.testing.scripted_host([{"text": "two"}], cwd=workspace) as second:
        assert os.environ["DSH_HOME"] == str(home)
        await first.close()
        assert home.is_dir()
        assert (await (await second.create_agent()).run("hi")).final_response == "two"
    assert not home.exists() and os.environ["DSH_HOME"] == before


async def test_composition_warnings_are_logged(workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with pydsh.testing.scripted_host([], cwd=workspace, patches=[[{"id": "nonesuch", "disabled": True}]]):
        pass
    assert 'patch 2: patch targets unknown row "nonesuch"; skipped' in caplog.text
