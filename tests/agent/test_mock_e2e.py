"""End to end against the loopback mock model server, through both HTTP adapters (spec 04 §9, 03 §12)."""

from __future__ import annotations

import asyncio
import importlib.abc
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pydsh.agent.keys import AGENTS
from pydsh.agent.loop import LoopAgent
from pydsh.agent.registry import CreateAgentOptions
from pydsh.contract.agent import AgentOptions, user_message
from pydsh.kernel import Kernel
from pydsh.kernel.compose import resolve_rows
from pydsh.testing.mock_model_server import MockModelServer
from tests.agent.harness import compose

FAST_RETRY = {"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0}}
READ = {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]}


def read_line(n: int) -> dict[str, Any]:
    """A distinct read per step (identical calls would earn repeat-call reminders)."""
    return {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt", "offset": 1, "limit": n}}]}


class Live:
    """A host whose model route is one of the real HTTP adapters, pointed at a mock server."""

    def __init__(self, kernel: Kernel, agent: LoopAgent) -> None:
        self.kernel = kernel
        self.agent = agent

    async def prompt(self, text: str) -> list[dict[str, Any]]:
        start = len(self.agent.session.events)
        self.agent.followup(user_message(text))
        await self.agent.when_idle()
        return self.agent.session.events[start:]


@pytest.fixture
async def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    kernels: list[Kernel] = []
    (tmp_path / "a.txt").write_text("alpha\n")

    async def start(server: MockModelServer, *, adapter: str = "deepseek", key: bool = True, **deepseek: Any) -> Live:
        if key:
            monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        patches: list[list[dict[str, Any]]] = [
            [{"id": "llm-deepseek", "config": {"retryPolicy": FAST_RETRY, **deepseek}}],
            [
                {
                    "id": "llm-openai-compat",
                    "config": {
                        "providers": [
                            {
                                "id": "local",
                                "baseURL": server.base_url + "/v1",
                                "models": [{"id": "mock-model", "contextWindow": 32768}],
                                "retryPolicy": FAST_RETRY,
                            }
                        ]
                    },
                }
            ],
        ]
        kernel = Kernel()
        await kernel.load(resolve_rows(compose(["base", "agent-tools"], patches).rows))
        kernels.append(kernel)
        options = AgentOptions(provider="local", model="mock-model") if adapter == "openai" else AgentOptions()
        handle = await kernel.ctx.require(AGENTS).create(CreateAgentOptions(cwd=str(tmp_path), agent_options=options))
        return Live(kernel, handle.agent)

    yield start
    for kernel in kernels:
        await kernel.dispose()


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


STEP_ONE = [
    "agent/inbox/spliced",
    "turn/start",
    "agent/inbox/spliced",
    "step/start",
    "system/message",
    "user/message",
    "user/message",
    "request/header",
    "request/context",
    "session/title",
    "assistant/message",
    "tool/call",
    "tool/result",
    "step/end",
]
LATER_STEP = ["step/start", "assistant/message", "tool/call", "tool/result", "step/end"]


@pytest.mark.parametrize("adapter", ["deepseek", "openai"])
async def test_ten_step_tool_task_follows_the_golden_order(live: Any, adapter: str) -> None:
    async with MockModelServer(sequence=[read_line(n) for n in range(1, 10)] + [{"text": "all read"}]) as server:
        host = await live(server, adapter=adapter)
        events = await host.prompt("read a.txt ten times")
    expected = STEP_ONE + LATER_STEP * 8 + ["step/start", "assistant/message", "step/end", "turn/end"]
    assert kinds(events) == expected
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert all(not r["message"]["isError"] for r in results)
    assert "1: alpha" in results[0]["message"]["content"][0]["text"]
    assert events[-1]["data"]["reason"] == {"kind": "completed"}
    assert len(server.requests) == 10


@pytest.mark.parametrize("adapter", ["deepseek", "openai"])
async def test_retries_then_success_in_one_step(live: Any, adapter: str) -> None:
    async with MockModelServer(sequence=["server_error", "stream_disconnect", "success"]) as server:
        host = await live(server, adapter=adapter)
        events = await host.prompt("hi")
    tail = kinds(events)[kinds(events).index("assistant/attempt") :]
    assert tail == [
        "assistant/attempt",
        "llm/retry",
        "llm/retry-started",
        "assistant/attempt",
        "llm/retry",
        "llm/retry-started",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    retries = [e["data"] for e in events if e["type"] == "llm/retry"]
    assert [r["failure"]["code"] for r in retries] == ["SERVER", "TRANSPORT"]
    assert retries[0]["retryId"] == retries[1]["retryId"]


@pytest.mark.parametrize("adapter", ["deepseek", "openai"])
async def test_401_ends_the_turn_with_error_and_the_next_prompt_runs(live: Any, adapter: str) -> None:
    async with MockModelServer(sequence=["auth_error", "success"]) as server:
        host = await live(server, adapter=adapter)
        events = await host.prompt("hi")
        assert kinds(events)[-3:] == ["assistant/attempt", "step/end", "turn/end"]
        reason = events[-1]["data"]["reason"]
        assert reason["kind"] == "error"
        assert (reason["error"]["code"], reason["error"]["status"]) == ("AUTH", 401)
        again = await host.prompt("again")
    assert again[-1]["data"]["reason"] == {"kind": "completed"}


async def test_cancel_mid_stream_then_next_prompt(live: Any) -> None:
    async with MockModelServer(sequence=["stall", "success"]) as server:
        host = await live(server)
        agent = host.agent
        agent.followup(user_message("stall please"))
        for _ in range(500):
            if server.requests:
                break
            await asyncio.sleep(0.01)
        agent.cancel({"kind": "user"})
        await agent.when_idle()
        assert agent.session.events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
        again = await host.prompt("again")
    assert again[-1]["data"]["reason"] == {"kind": "completed"}


async def test_missing_api_key_is_a_clear_error(live: Any) -> None:
    async with MockModelServer(sequence=["success"]) as server:
        host = await live(server, key=False)
        events = await host.prompt("hi")
    error = events[-1]["data"]["reason"]["error"]
    assert error["code"] == "MISSING_CREDENTIAL"
    assert "DEEPSEEK_API_KEY" in error["message"]
    assert not server.requests


async def test_unreachable_base_url_fails_with_transport_after_retries(live: Any, tmp_path: Path) -> None:
    async with MockModelServer(sequence=[]) as server:
        host = await live(server, baseURL="http://127.0.0.1:9")
        events = await host.prompt("hi")
    assert kinds(events).count("assistant/attempt") == 6
    assert events[-1]["data"]["reason"]["error"]["code"] == "TRANSPORT"


async def test_unknown_provider_is_a_clear_error(live: Any, tmp_path: Path) -> None:
    async with MockModelServer(sequence=[]) as server:
        host = await live(server)
        handle = await host.kernel.ctx.require(AGENTS).create(
            CreateAgentOptions(cwd=str(tmp_path), agent_options=AgentOptions(provider="nope", model="x"))
        )
        host.agent = handle.agent
        events = await host.prompt("hi")
    error = events[-1]["data"]["reason"]["error"]
    assert error == {"message": 'no adapter registered for provider "nope"', "code": "NO_ADAPTER"}


async def test_malformed_arguments_and_unknown_tools_become_error_results(live: Any) -> None:
    """Chat-completions servers pass raw argument text through; the tools pipeline reports it."""
    bad_args = {"tool_calls": [{"name": "read", "arguments": "{not json"}, {"name": "nope_tool", "arguments": {}}]}
    async with MockModelServer(sequence=[bad_args, {"text": "recovered"}]) as server:
        host = await live(server, adapter="openai")
        events = await host.prompt("hi")
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert results[0]["message"]["content"][0]["text"] == 'Error: invalid arguments: "arguments" must be an object'
    assert results[0]["error"]["code"] == "INVALID_ARGS"
    assert results[1]["message"]["content"][0]["text"] == 'Error: unknown tool "nope_tool"'
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


async def test_malformed_tool_input_from_messages_api_is_a_failed_attempt(live: Any) -> None:
    """The Messages adapter refuses a tool_use whose input is not a JSON object (spec 04 §4.7)."""
    bad_args = {"tool_calls": [{"name": "read", "arguments": "{not json"}]}
    async with MockModelServer(sequence=[bad_args, "success"]) as server:
        host = await live(server)
        events = await host.prompt("hi")
        assert events[-1]["data"]["reason"]["error"]["code"] == "MALFORMED_RESPONSE"
        again = await host.prompt("again")
    assert again[-1]["data"]["reason"] == {"kind": "completed"}


class Searches(importlib.abc.MetaPathFinder):
    """Records every module the import system looks for (one already imported is never looked for)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        self.names.append(name)


async def test_a_later_turn_looks_for_no_module(live: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed import is not remembered: one in the request path would search ``sys.path`` on every step."""
    async with MockModelServer(sequence=[read_line(1), {"text": "one"}, read_line(2), {"text": "two"}]) as server:
        host = await live(server)
        await host.prompt("first")
        searches = Searches()
        monkeypatch.setattr(sys, "meta_path", [searches, *sys.meta_path])
        await host.prompt("second")
    assert searches.names == []


@pytest.mark.parametrize("adapter", ["deepseek", "openai"])
async def test_model_calls_of_a_session_share_one_connection(live: Any, adapter: str) -> None:
    """A finished stream is read to its end, so its connection serves the next call (no handshake per step)."""
    async with MockModelServer(sequence=[read_line(1), read_line(2), {"text": "done"}]) as server:
        host = await live(server, adapter=adapter)
        await host.prompt("read twice")
    assert (len(server.requests), server.connections) == (3, 1)
