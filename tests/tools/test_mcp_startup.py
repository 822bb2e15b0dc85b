"""A slow or silent MCP server does not hold startup; its tools arrive when it is ready (issue 21, item 10)."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest

import pydsh.testing
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import TOOLS
from pydsh.kernel import create_scope
from pydsh.testing import mcp_server
from pydsh.tools.mcp import mount_servers, public_tool_name
from tests.tools.harness import harness, text_of
from tests.tools.test_mcp import mounted, names, server_of, stdio, until

SILENT = {
    "transport": "stdio",
    "serverName": "mute",
    "command": sys.executable,
    "args": ["-c", "import time; time.sleep(60)"],
}


async def test_a_server_that_never_answers_does_not_hold_startup(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
        async with mounted(tmp_path, {**SILENT, "startupWaitMs": 200}) as h:
            assert names(h) == []
            assert time.monotonic() - started < 10, "activation waited for initialize (30 s) instead of 200 ms"
    assert (
        "mcp-client(mute): not connected within startupWaitMs (200ms); connecting in the background, "
        "its tools are added when it is ready"
    ) in caplog.text


async def test_a_slow_servers_tools_and_instructions_arrive_when_it_is_ready(tmp_path: Path) -> None:
    slow = stdio("--start-delay", "1", "--instructions", "Arrived late.", startupWaitMs=50)
    async with mounted(tmp_path, slow) as h:
        assert names(h) == []
        prompt = h.kernel.ctx.require(SYSTEM_PROMPT)
        assert "### MCP server: t" not in prompt.render(await prompt.assemble(h.agent))
        await until(lambda: len(names(h)) == len(mcp_server.BASE_TOOLS), "the late tools")
        assert text_of(await h.call("mcp__t__echo", {"text": "late"})) == "late"
        assert "### MCP server: t\n\nArrived late." in prompt.render(await prompt.assemble(h.agent))
        assert server_of(h).session is not None


async def test_late_tools_reach_the_model_once_as_a_tool_list_change(tmp_path: Path) -> None:
    row = {"id": "mcp-t", "name": "mcp-client", "config": stdio("--start-delay", "1", startupWaitMs=50)}
    async with pydsh.testing.scripted_host(
        [{"text": "before"}, {"text": "after"}], cwd=tmp_path, patches=[[{"insert": [row]}]]
    ) as host:
        agent = await host.create_agent()
        assert (await agent.run("first")).final_response == "before"
        registry = host.ctx.require(TOOLS)
        await until(lambda: "mcp__t__echo" in [d.name for d in registry.definitions(None)], "the late tools")
        assert (await agent.run("second")).final_response == "after"
        host.assert_consumed()
    headers = [e["data"]["header"] for e in agent.events if e["type"] == "request/header"]
    assert not any(t["name"].startswith("mcp__") for t in headers[0]["tools"])
    late = sorted(public_tool_name("t", t["name"]) for t in mcp_server.BASE_TOOLS)
    assert sorted(t["name"] for t in headers[-1]["tools"] if t["name"].startswith("mcp__")) == late
    notices = [e["data"]["message"]["content"] for e in agent.events if e["type"] == "developer/message"]
    assert notices == [[{"type": "tool-addition", "toolName": name} for name in late]]


async def test_per_session_servers_connect_together(tmp_path: Path) -> None:
    h = await harness(tmp_path, [("tools", None)])
    try:
        scope = create_scope(h.kernel.ctx, "session-scope")
        silent = [
            {**SILENT, "serverName": f"mute{i}", "failOnStartupError": True, "requestTimeoutMs": 1500} for i in range(3)
        ]
        started = time.monotonic()
        with pytest.raises(
            RuntimeError, match=r"mcp-client\(mute0\): initial connection or tool synchronization failed"
        ):
            await mount_servers(scope.ctx, silent)
        assert time.monotonic() - started < 8, "the three initialize timeouts ran one after another"
    finally:
        await h.close()
