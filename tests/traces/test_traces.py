"""The ``traces`` row: a scripted session's spans reach a loopback OTLP receiver as turn → step → call trees."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pydsh.testing.hosts import scripted_host
from tests.traces.receiver import Receiver, Span, otlp_receiver

OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
)
ERROR = 2
"""``Status.STATUS_CODE_ERROR`` in OTLP."""

TOOL_SCRIPT = [
    {
        "tool_calls": [
            {"id": "call-a", "name": "read", "arguments": {"file_path": "a.txt"}},
            {"id": "call-b", "name": "read", "arguments": {"file_path": "missing.txt"}},
        ],
        "usage": {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150},
    },
    {"text": "Read a.txt.", "usage": {"inputTokens": 200, "outputTokens": 5, "totalTokens": 205}},
]


@pytest.fixture(autouse=True)
def no_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from a process whose ``OTEL_*`` variables are unset."""
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


async def traced_run(tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the two-step tool script with traces sent to ``receiver``; the session id."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "traces-test")
    (tmp_path / "a.txt").write_text("hello\n")
    async with scripted_host(TOOL_SCRIPT, cwd=tmp_path) as host:
        agent = await host.create_agent()
        result = await agent.run("read a.txt")
        assert result.final_response == "Read a.txt."
        host.assert_consumed()
        return agent.session_id


def only(spans: list[Span]) -> Span:
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


async def test_a_tool_session_exports_the_turn_step_call_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with otlp_receiver() as receiver:
        session_id = await traced_run(tmp_path, receiver, monkeypatch)
    assert set(receiver.paths) == {"/v1/traces"}
    turn = only(receiver.named("invoke_agent pydsh"))
    assert turn.parent_id == b""
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["pydsh.turn.finish_reason"] == "completed"
    assert turn.resource["service.name"] == "traces-test"
    steps = receiver.children(turn)
    assert sorted(s.name for s in steps) == ["step 1", "step 2"]
    first = only(receiver.named("step 1"))
    assert sorted(s.name for s in receiver.children(first)) == [
        "chat deepseek-v4-flash",
        "execute_tool read",
        "execute_tool read",
    ]
    assert {s.trace_id for s in receiver.spans} == {turn.trace_id}
    assert {s.attributes["gen_ai.conversation.id"] for s in receiver.spans} == {session_id}


async def test_model_call_spans_carry_genai_route_usage_and_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with otlp_receiver() as receiver:
        await traced_run(tmp_path, receiver, monkeypatch)
    first, second = receiver.named("chat deepseek-v4-flash")
    assert first.attributes == first.attributes | {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "deepseek-official",
        "gen_ai.request.model": "deepseek-v4-flash",
        "gen_ai.response.model": "deepseek-v4-flash",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.response.finish_reasons": ["tool-calls"],
    }
    assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert second.attributes["gen_ai.usage.output_tokens"] == 5
    assert first.status != ERROR and second.status != ERROR


async def test_tool_spans_name_the_call_and_mark_a_failed_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with otlp_receiver() as receiver:
        await traced_run(tmp_path, receiver, monkeypatch)
    calls = {s.attributes["gen_ai.tool.call.id"]: s for s in receiver.named("execute_tool read")}
    assert calls["call-a"].attributes["gen_ai.tool.name"] == "read"
    assert calls["call-a"].attributes["gen_ai.operation.name"] == "execute_tool"
    assert calls["call-a"].status != ERROR
    assert calls["call-b"].status == ERROR
    assert calls["call-b"].attributes["error.type"] == "tool_error"


async def test_an_aborted_turn_ends_its_spans_with_an_error_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ready = tmp_path / "model-called"
    async with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.url}/custom/traces")
        async with scripted_host([{"hang": {"readyFile": str(ready)}}], cwd=tmp_path) as host:
            agent = await host.create_agent()
            running = asyncio.create_task(agent.run("wait"))
            while not ready.exists():
                await asyncio.sleep(0.01)
            agent.cancel()
            assert (await running).finish_reason == "aborted"
    assert set(receiver.paths) == {"/custom/traces"}
    turn = only(receiver.named("invoke_agent pydsh"))
    step = only(receiver.named("step 1"))
    model = only(receiver.named("chat deepseek-v4-flash"))
    assert (turn.status, turn.message) == (ERROR, "the turn was aborted")
    assert turn.attributes["error.type"] == "aborted"
    assert step.status == ERROR and model.status == ERROR
    assert model.parent_id == step.span_id and step.parent_id == turn.span_id


async def test_closing_mid_turn_ends_and_flushes_the_open_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ready = tmp_path / "model-called"
    async with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        async with scripted_host([{"hang": {"readyFile": str(ready)}}], cwd=tmp_path) as host:
            agent = await host.create_agent()
            running = asyncio.create_task(agent.run("wait"))
            while not ready.exists():
                await asyncio.sleep(0.01)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert sorted(s.name for s in receiver.spans) == ["chat deepseek-v4-flash", "invoke_agent pydsh", "step 1"]
    assert all(s.status == ERROR for s in receiver.spans)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_an_unreachable_endpoint_warns_once_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.2")
    (tmp_path / "a.txt").write_text("hello\n")
    caplog.set_level(logging.WARNING)
    async with scripted_host(TOOL_SCRIPT, cwd=tmp_path) as host:
        agent = await host.create_agent()
        assert (await agent.run("read a.txt")).final_response == "Read a.txt."
        assert (await agent.run("again")).finish_reason is not None
    warnings = [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0][0] == "pydsh.traces"
    assert f"could not be exported to {endpoint}/v1/traces" in warnings[0][1]


def test_an_unconfigured_process_imports_no_opentelemetry(tmp_path: Path) -> None:
    probe = """
import asyncio, os, sys
from pydsh.testing.hosts import scripted_host

async def main():
    async with scripted_host([{"text": "hi"}]) as host:
        await (await host.create_agent()).run("hi")

asyncio.run(main())
print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
"""
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


LEAD_AND_MEMBER = [
    [
        {"tool_calls": [{"id": "call-s", "name": "subagent", "arguments": {"description": "scan", "prompt": "scan"}}]},
        {"text": "The member is on it."},
        {"text": "The member reported back."},
    ],
    [{"text": "Scanned."}],
]


async def test_a_subagents_turns_hang_under_the_tool_call_that_started_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        async with scripted_host(LEAD_AND_MEMBER, cwd=tmp_path) as host:
            lead = await host.create_agent()
            await lead.run("delegate the scan")
            for _ in range(200):
                if all(a.status != "running" for a in host.registry.all()) and len(host.registry.all()) > 1:
                    break
                await asyncio.sleep(0.05)
            lead_id = lead.session_id
    call = only(receiver.named("execute_tool subagent"))
    turns = receiver.named("invoke_agent pydsh")
    member_turns = [t for t in turns if t.attributes["gen_ai.conversation.id"] != lead_id]
    assert member_turns, [t.attributes for t in turns]
    assert {t.parent_id for t in member_turns} == {call.span_id}
    assert {t.trace_id for t in member_turns} == {call.trace_id}
