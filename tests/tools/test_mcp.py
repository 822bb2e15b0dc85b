"""The MCP client against real servers built with the ``mcp`` package (spec 11 §B.7)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import pydsh.testing
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import TOOL_NAME, ToolDefinition
from pydsh.kernel import Kernel, create_scope
from pydsh.testing import mcp_server
from pydsh.tools.mcp import (
    McpConfigError,
    McpServer,
    mount_servers,
    normalize_server_name,
    parse_config,
    project_content,
    public_tool_name,
)
from tests.tools.harness import Harness, harness, rows_of, text_of

SERVER = mcp_server.__file__
FAST = {"initialDelayMs": 20, "maxDelayMs": 200, "maxAttempts": 3}


def stdio(*args: str, name: str = "t", **overrides: Any) -> dict[str, Any]:
    """A row config for the test server over stdio."""
    return {
        "transport": "stdio",
        "serverName": name,
        "command": sys.executable,
        "args": [SERVER, *args],
        "toolCallTimeoutMs": 5000,
        **overrides,
    }


@contextlib.asynccontextmanager
async def mounted_rows(tmp_path: Path, *rows: tuple[str, Any]) -> AsyncIterator[Harness]:
    h = await harness(tmp_path, [("tools", None), *rows])
    try:
        yield h
    finally:
        await h.close()


def mounted(tmp_path: Path, *configs: dict[str, Any]) -> contextlib.AbstractAsyncContextManager[Harness]:
    return mounted_rows(tmp_path, *(("mcp-client", c) for c in configs))


def names(h: Harness) -> list[str]:
    return [d.name for d in h.tools.definitions(h.agent) if d.name.startswith("mcp__")]


def server_of(h: Harness, name: str = "t") -> McpServer:
    for fiber in h.kernel.ctx.fiber.children:
        if isinstance(fiber.instance, McpServer) and fiber.instance.server_name == name:
            return fiber.instance
    raise AssertionError(f"no mcp-client row {name}")


async def until(check: Callable[[], bool], what: str, polls: int = 2000) -> None:
    """Wait (bounded) until ``check()`` holds; the bound only guards against a hang."""
    for _ in range(polls):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def http_server(*args: str, path: str = "/mcp") -> Iterator[str]:
    """The test server over loopback HTTP (``--http`` or ``--sse`` among ``args``); yields its URL."""
    proc = subprocess.Popen([sys.executable, SERVER, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        proc.terminate()
        proc.wait(10)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- 1. naming ----------------------------------------------------------------------------------


def test_clean_names_stay_and_others_are_hashed() -> None:
    assert public_tool_name("fs", "read_file") == "mcp__fs__read_file"
    dotted = public_tool_name("fs", "read.file")
    assert re.fullmatch(r"mcp__fs__read_file_[0-9a-f]{12}", dotted)
    long = public_tool_name("server", "x" * 80)
    assert len(long) == 64 and long.startswith("mcp__server__xxx") and TOOL_NAME.match(long)
    assert public_tool_name("fs", "a.b") != public_tool_name("fs", "a_b") != public_tool_name("fs", "a b")


@given(
    server=st.from_regex(r"[A-Za-z0-9_-]{1,32}", fullmatch=True),
    raw=st.text(min_size=1, max_size=100),
    other=st.text(min_size=1, max_size=100),
)
def test_public_names_are_valid_and_collision_free(server: str, raw: str, other: str) -> None:
    first, second = public_tool_name(server, raw), public_tool_name(server, other)
    assert TOOL_NAME.match(first) and len(first) <= 64
    assert first == public_tool_name(server, raw)
    if raw != other:
        assert first != second


@given(base=st.text(alphabet="ab.", min_size=1, max_size=8))
def test_names_colliding_after_replacement_get_distinct_hashes(base: str) -> None:
    dotted, underscored = base, base.replace(".", "_")
    if dotted != underscored:
        assert public_tool_name("s", dotted) != public_tool_name("s", underscored)


def test_declared_server_names_are_normalised() -> None:
    assert normalize_server_name("github") == "github"
    long = normalize_server_name("My Fancy Server (prod) ünïcode")
    assert re.fullmatch(r"My_Fancy_Server_prod_[0-9a-f]{8}", long)
    assert normalize_server_name("!!!").startswith("server_")
    for bad in ("", "  ", "a\nb"):
        with pytest.raises(ValueError, match="invalid server name"):
            normalize_server_name(bad)


def test_config_rules() -> None:
    assert parse_config(stdio()).reconnect.maxAttempts == 10
    cases = [
        ({"transport": "stdio", "serverName": "a"}, "needs a command"),
        ({**stdio(), "url": "http://x"}, "url do not apply to transport stdio"),
        ({"transport": "streamable-http", "serverName": "a", "url": "ftp://x"}, "absolute http"),
        ({**stdio(), "serverName": "has space"}, "serverName"),
        ({**stdio(), "reconnect": {"retries": 3}}, "reconnect.retries"),
        ({**stdio(), "reconnect": {"initialDelayMs": 10, "maxDelayMs": 5}}, "initialDelayMs must not exceed"),
        ({**stdio(), "reconnect": {"maxAttempts": 0}}, "maxAttempts"),
    ]
    for raw, expected in cases:
        with pytest.raises(McpConfigError, match=re.escape(expected)):
            parse_config(raw)


def test_content_projection() -> None:
    items = [
        {"type": "text", "text": "a"},
        {"type": "resource_link", "name": "n"},
        {"type": "image"},
        {"type": "audio", "mimeType": "audio/ogg"},
        "nope",
        {"type": "hologram"},
    ]
    assert project_content("t", items).split("\n") == [
        "a",
        "[resource link unavailable: the MCP block is missing its name or URI]",
        "[image unavailable: unknown media type; no attachment store is mounted; "
        "raw image data remains available to programmatic callers]",
        "[audio result unsupported: audio/ogg; raw audio data remains available to programmatic callers]",
        "[unsupported MCP content block: expected an object]",
        "[unsupported MCP content type: hologram]",
    ]
    assert project_content("t", []) == "(t returned no model-visible content)"


# -- 2. startup ---------------------------------------------------------------------------------


async def test_tools_and_instructions_reach_the_next_request(tmp_path: Path) -> None:
    row = {"id": "mcp-t", "name": "mcp-client", "config": stdio("--instructions", "Prefer echo.  \n")}
    script = [
        {"tool_calls": [{"name": "mcp__t__echo", "arguments": {"text": "ping"}}]},
        {"text": "done"},
    ]
    async with pydsh.testing.scripted_host(script, cwd=tmp_path, patches=[[{"insert": [row]}]]) as host:
        agent = await host.create_agent()
        result = await agent.run("use the server")
        host.assert_consumed()
    assert result.final_response == "done"
    events = agent.events
    header = next(e for e in events if e["type"] == "request/header")["data"]["header"]
    listed = [t["name"] for t in header["tools"]]
    assert listed == sorted(listed)
    mcp_tools = [t for t in header["tools"] if t["name"].startswith("mcp__t__")]
    assert {t["name"] for t in mcp_tools} >= {"mcp__t__echo", "mcp__t__mixed", public_tool_name("t", "read.file")}
    echo = next(t for t in mcp_tools if t["name"] == "mcp__t__echo")
    assert echo["description"] == "Echo the text back."
    assert echo["parameters"] == mcp_server.BASE_TOOLS[0]["inputSchema"]
    system = next(e for e in events if e["type"] == "system/message")["data"]["message"]["content"][0]["text"]
    assert system.endswith("### MCP server: t\n\nPrefer echo.")
    results = [e for e in events if e["type"] == "tool/result"]
    assert results[0]["data"]["message"]["content"] == [{"type": "text", "text": "ping"}]
    assert results[0]["data"]["meta"] == {"server": "t", "tool": "echo"}


async def test_oversize_instructions_fail_the_attempt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    strict = stdio("--instructions-bytes", "101", name="big", maxInstructionBytes=100, failOnStartupError=True)
    kernel = Kernel()
    await kernel.load(rows_of([("tools", None), ("mcp-client", strict)]))
    try:
        (failed,) = kernel.loader.failures
        assert str(failed.error) == "mcp-client(big): initial connection or tool synchronization failed"
        assert str(failed.error.__cause__) == "mcp-client(big): server instructions exceed maxInstructionBytes (100)"
    finally:
        await kernel.dispose()
    lenient = stdio("--instructions-bytes", "101", name="big", maxInstructionBytes=100, reconnect={"enabled": False})
    with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
        async with mounted(tmp_path, lenient) as h:
            assert names(h) == []
    assert "mcp-client(big): initial connection failed: mcp-client(big): server instructions exceed" in caplog.text


async def test_paged_listing_and_a_server_without_tools(tmp_path: Path) -> None:
    async with mounted(tmp_path, stdio("--page-size", "3"), stdio("--no-tools", name="bare")) as h:
        assert len(names(h)) == len(mcp_server.BASE_TOOLS)
        assert not any(n.startswith("mcp__bare__") for n in names(h))


async def test_a_tool_listed_twice_is_an_invalid_tool_list(tmp_path: Path) -> None:
    kernel = Kernel()
    await kernel.load(rows_of([("tools", None), ("mcp-client", stdio("--duplicate", failOnStartupError=True))]))
    try:
        (failed,) = kernel.loader.failures
        cause = str(failed.error.__cause__)
        assert cause == 'mcp-client(t): server listed tool "echo" more than once — invalid tool list'
    finally:
        await kernel.dispose()


async def test_server_names_are_unique_per_scope(tmp_path: Path) -> None:
    kernel = Kernel()
    await kernel.load(rows_of([("tools", None), ("mcp-client", stdio()), ("mcp-client", stdio())]))
    try:
        (failed,) = kernel.loader.failures
        assert str(failed.error) == (
            'mcp-client: serverName "t" is already in use by another mcp-client instance — '
            "pick a unique serverName in the profile"
        )
    finally:
        await kernel.dispose()


async def test_streamable_http_server(tmp_path: Path) -> None:
    with http_server("--http", "--instructions", "Over HTTP.") as url:
        config = {
            "transport": "streamable-http",
            "serverName": "web",
            "url": url,
            "headers": {"X-Test": "1"},
            "failOnStartupError": True,
        }
        async with mounted(tmp_path, config) as h:
            assert "mcp__web__echo" in names(h)
            assert text_of(await h.call("mcp__web__echo", {"text": "over http"})) == "over http"
            failed = await h.call("mcp__web__fail", {})
            assert text_of(failed) == "Error: the widget is broken"
            assert server_of(h, "web").instructions == "Over HTTP."


# -- 3. calls -----------------------------------------------------------------------------------


async def test_call_results_and_errors(tmp_path: Path) -> None:
    async with mounted(tmp_path, stdio(toolCallTimeoutMs=300)) as h:
        assert text_of(await h.call("mcp__t__echo", {"text": "hi"})) == "hi"
        mixed = await h.call("mcp__t__mixed", {})
        assert mixed.content == [
            {
                "type": "text",
                "text": "one\ntwo\nResource link: notes (file:///tmp/notes.txt)\n"
                "[image unavailable: image/png; no attachment store is mounted; "
                "raw image data remains available to programmatic callers]\n"
                "[audio result unsupported: audio/wav; raw audio data remains available to programmatic callers]\n"
                "[embedded resource unsupported; raw resource data remains available to programmatic callers]",
            }
        ]
        failed = await h.call("mcp__t__fail", {})
        assert failed.is_error and text_of(failed) == "Error: the widget is broken"
        lie = await h.call("mcp__t__lie", {})
        assert lie.error == {"name": "ToolError", "code": "MCP_INVALID_RESULT"}
        assert text_of(lie).startswith('Error: Tool "lie" returned an invalid MCP result: content: ')
        hang = await h.call("mcp__t__hang", {})
        assert text_of(hang) == "Error: mcp-client(t): tool call timed out after 300ms"
        assert text_of(await h.call("mcp__t__echo", {"text": "still here"})) == "still here"
        missing = await h.call("mcp__t__echo", {})
        assert text_of(missing) == 'Error: invalid arguments: missing required property "text"'
        wrong = await h.call("mcp__t__echo", {"text": 3})
        assert text_of(wrong) == 'Error: invalid arguments: "text" must be a string'
        empty = await h.call("mcp__t__empty", {})
        assert text_of(empty) == "(empty returned no model-visible content)"
        structured = await h.call("mcp__t__structured", {})
        assert structured.meta == {"server": "t", "tool": "structured", "structuredContent": {"n": 3}}
        assert text_of(structured) == "n is 3"
        tasked = await h.call("mcp__t__tasked", {})
        assert (
            text_of(tasked) == 'Error: Tool "tasked" requires task-based execution, which this bridge does not support'
        )
        dotted = await h.call(public_tool_name("t", "read.file"), {})
        assert text_of(dotted) == "read.file ok"


async def test_garbage_on_stdout_is_logged_and_the_connection_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with mounted(tmp_path, stdio()) as h:
        with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
            assert text_of(await h.call("mcp__t__noise", {})) == "noisy"
            await until(lambda: "mcp-client(t): transport error" in caplog.text, "the warning")
        assert text_of(await h.call("mcp__t__echo", {"text": "still"})) == "still"


async def test_abort_cancels_the_call_and_the_server_keeps_serving(tmp_path: Path) -> None:
    async with mounted(tmp_path, stdio()) as h:
        call = asyncio.ensure_future(h.call("mcp__t__hang", {}))
        await asyncio.sleep(0.2)
        h.controller.abort("user")
        assert text_of(await call) == "Error: tool call aborted"
        h.controller = type(h.controller)()
        assert text_of(await h.call("mcp__t__echo", {"text": "after"})) == "after"


async def test_a_misbehaving_server_never_breaks_the_turn_or_its_log(tmp_path: Path) -> None:
    slow_restart = {"initialDelayMs": 60000, "maxDelayMs": 60000}
    row = {"id": "mcp-t", "name": "mcp-client", "config": stdio(toolCallTimeoutMs=300, reconnect=slow_restart)}
    calls = [{"name": f"mcp__t__{n}", "arguments": {"text": "x"}} for n in ("lie", "hang", "crash", "echo")]
    script = [{"tool_calls": calls}, {"text": "survived"}]
    async with pydsh.testing.scripted_host(script, cwd=tmp_path, patches=[[{"insert": [row]}]]) as host:
        agent = await host.create_agent()
        result = await agent.run("break it")
        host.assert_consumed()
    assert result.final_response == "survived"
    events = agent.events
    call_ids = [e["data"]["callId"] for e in events if e["type"] == "tool/call"]
    results = {e["data"]["message"]["toolCallId"]: e["data"] for e in events if e["type"] == "tool/result"}
    assert sorted(results) == sorted(call_ids) and len(call_ids) == 4
    texts = [results[c]["message"]["content"][0]["text"] for c in call_ids]
    assert texts[0].startswith('Error: Tool "lie" returned an invalid MCP result')
    assert texts[1] == "Error: mcp-client(t): tool call timed out after 300ms"
    assert texts[2] == texts[3] == "Error: mcp-client(t): server is disconnected"
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"]["kind"] == "completed"


# -- 4. list_changed ----------------------------------------------------------------------------


async def test_list_changed_adds_and_removes_a_tool_and_the_model_is_told(tmp_path: Path) -> None:
    row = {"id": "mcp-t", "name": "mcp-client", "config": stdio()}
    script = [
        [
            {"tool_calls": [{"name": "mcp__t__toggle", "arguments": {}}]},
            {"text": "added"},
            {"tool_calls": [{"name": "mcp__t__toggle", "arguments": {}}]},
            {"text": "removed"},
        ]
    ]
    async with pydsh.testing.scripted_host(script, cwd=tmp_path, patches=[[{"insert": [row]}]]) as host:
        agent = await host.create_agent()
        assert (await agent.run("toggle")).final_response == "added"
        assert (await agent.run("toggle again")).final_response == "removed"
        host.assert_consumed()
    notices = [
        c
        for e in agent.events
        if e["type"] == "developer/message"
        for c in e["data"]["message"]["content"]
        if c["type"] in ("tool-addition", "tool-removal")
    ]
    assert notices == [
        {"type": "tool-addition", "toolName": "mcp__t__extra"},
        {"type": "tool-removal", "toolName": "mcp__t__extra"},
    ]


async def test_failed_resync_keeps_the_old_tools(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    flag = tmp_path / "refuse-listing"
    async with mounted(tmp_path, stdio("--fail-list-if-exists", str(flag))) as h:
        assert text_of(await h.call("mcp__t__toggle", {})) == "added extra"
        await until(lambda: "mcp__t__extra" in names(h), "the re-sync")
        before = names(h)
        flag.touch()
        with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
            assert text_of(await h.call("mcp__t__toggle", {})) == "removed extra"
            await until(lambda: "re-sync failed" in caplog.text, "the failed re-sync")
        assert names(h) == before
        assert "mcp-client(t): tool re-sync failed, keeping the previous tools" in caplog.text
        gone = await h.call("mcp__t__extra", {})
        assert text_of(gone) == 'Error: mcp-client(t): tool "extra" failed: unknown tool extra'
        assert gone.error == {"name": "ToolError", "code": "MCP_ERROR"}


async def test_a_tool_list_changing_mid_call_still_answers(tmp_path: Path) -> None:
    async with mounted(tmp_path, stdio()) as h:
        assert text_of(await h.call("mcp__t__vanish", {})) == "gone"
        await until(lambda: "mcp__t__vanish" not in names(h), "the re-sync")
        assert text_of(await h.call("mcp__t__vanish", {})) == 'Error: unknown tool "mcp__t__vanish"'
        assert text_of(await h.call("mcp__t__echo", {"text": "fine"})) == "fine"


# -- 5. crash and reconnect ---------------------------------------------------------------------


async def test_crash_reconnects_with_one_process(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with mounted(tmp_path, stdio(reconnect=FAST)) as h:
        server = server_of(h)
        echo = h.tools.lookup(h.agent, "mcp__t__echo")
        first = int(text_of(await h.call("mcp__t__pid", {})))
        with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
            crashed = await h.call("mcp__t__crash", {})
            assert text_of(crashed) == "Error: mcp-client(t): server is disconnected"
            assert crashed.error == {"name": "ToolError", "code": "MCP_DISCONNECTED"}
            await until(lambda: server.session is None, "the drop")
            assert (
                text_of(await h.call("mcp__t__echo", {"text": "x"})) == "Error: mcp-client(t): server is disconnected"
            )
            assert "mcp__t__echo" in names(h)
            await until(lambda: server.session is not None, "the reconnect")
        second = int(text_of(await h.call("mcp__t__pid", {})))
        assert second != first and not alive(first)
        assert h.tools.lookup(h.agent, "mcp__t__echo") is echo, "an unchanged listing re-registers nothing"
        assert "mcp-client(t): connection lost; reconnecting in 20ms (attempt 1/3)" in caplog.text


async def test_exhausted_reconnects_unregister_the_tools(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    flag = tmp_path / "refuse-start"
    async with mounted(tmp_path, stdio("--fail-if-exists", str(flag), reconnect=FAST)) as h:
        flag.touch()
        with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
            await h.call("mcp__t__crash", {})
            await until(lambda: names(h) == [], "the tools to go")
        assert "mcp-client(t): connection lost; reconnecting in 20ms (attempt 1/3)" in caplog.text
        assert "connection lost; reconnecting in 80ms (attempt 3/3)" in caplog.text
        assert (
            "mcp-client(t): giving up after 3 consecutive failed reconnect attempts — tools unregistered; "
            "reload the plugin or restart to reconnect"
        ) in caplog.text


async def test_a_connection_that_stayed_up_resets_the_attempt_budget(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with mounted(tmp_path, stdio(reconnect=FAST)) as h:
        server = server_of(h)
        with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
            for _ in range(2):
                await h.call("mcp__t__crash", {})
                await until(lambda: server.session is None, "the drop")
                await until(lambda: server.session is not None, "the reconnect")
                await asyncio.sleep(FAST["maxDelayMs"] / 1000 * 1.5)
        assert caplog.text.count("connection lost; reconnecting in 20ms (attempt 1/3)") == 2
        assert "attempt 2/3" not in caplog.text


async def test_reconnect_disabled_keeps_failing_tools(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with mounted(tmp_path, stdio(reconnect={"enabled": False})) as h:
        server = server_of(h)
        with caplog.at_level(logging.ERROR, "pydsh.tools.mcp"):
            await h.call("mcp__t__crash", {})
            await until(lambda: "reconnect is disabled" in caplog.text, "the error")
        assert "mcp__t__echo" in names(h) and server.session is None
        assert text_of(await h.call("mcp__t__echo", {"text": "x"})) == "Error: mcp-client(t): server is disconnected"
        assert caplog.text.count("mcp-client(t): connection ended and reconnect is disabled") == 1


async def test_no_reconnect_while_the_old_server_lives_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pidfile = tmp_path / "orphan.pid"
    async with mounted(tmp_path, stdio("--orphan-pidfile", str(pidfile), reconnect=FAST)) as h:
        orphan = int(pidfile.read_text())
        try:
            with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
                await h.call("mcp__t__crash", {})
                await until(lambda: "did not exit" in caplog.text, "the refusal", polls=4000)
            assert "reconnecting in" not in caplog.text
            assert server_of(h).session is None
        finally:
            os.kill(orphan, signal.SIGKILL)
    assert (
        "mcp-client(t): the server process did not exit within 5s of closing its connection — not reconnecting "
        "(never two server processes for one name)"
    ) in caplog.text


async def test_a_conflicting_tool_rolls_back_to_no_tools(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    h = await harness(tmp_path, [("tools", None)])
    try:
        taken = ToolDefinition("mcp__t__echo", "not from the server", {"type": "object"}, lambda args, exec: "mine")
        h.tools.register(h.kernel.ctx, taken)
        with caplog.at_level(logging.ERROR, "pydsh.tools.mcp"):
            unmount = await mount_servers(h.kernel.ctx, [stdio()])
        assert names(h) == ["mcp__t__echo"] and h.tools.lookup(None, "mcp__t__echo") is taken
        assert "mcp-client(t): tool registration failed, no tools registered: " in caplog.text
        await unmount()
    finally:
        await h.close()


async def test_hanging_server_is_killed_on_close(tmp_path: Path) -> None:
    async with mounted(tmp_path, stdio()) as h:
        pid = int(text_of(await h.call("mcp__t__pid", {})))
        os.kill(pid, signal.SIGSTOP)
        server = server_of(h)
        await server.close()
        assert server.closed and names(h) == []
    await until(lambda: not alive(pid), "the stopped server to be killed")


# -- 6. startup failures ------------------------------------------------------------------------


async def test_fail_on_startup_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bad = {"transport": "stdio", "serverName": "bad", "command": str(tmp_path / "no-such-server")}
    kernel = Kernel()
    await kernel.load(rows_of([("tools", None), ("mcp-client", {**bad, "failOnStartupError": True})]))
    try:
        (failed,) = kernel.loader.failures
        assert str(failed.error) == "mcp-client(bad): initial connection or tool synchronization failed"
        assert failed.error.__cause__ is not None
    finally:
        await kernel.dispose()
    with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
        async with mounted(tmp_path, {**bad, "reconnect": FAST}) as h:
            assert names(h) == []
            await until(lambda: "connection failed; retrying in 20ms (attempt 1/3)" in caplog.text, "a retry")
    assert "mcp-client(bad): initial connection failed" in caplog.text


async def test_a_server_that_never_answers_initialize_times_out() -> None:
    silent = {
        "transport": "stdio",
        "serverName": "mute",
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(60)"],
        "failOnStartupError": True,
        "requestTimeoutMs": 500,
    }
    kernel = Kernel()
    await kernel.load(rows_of([("tools", None), ("mcp-client", silent)]))
    try:
        (failed,) = kernel.loader.failures
        assert str(failed.error) == "mcp-client(mute): initial connection or tool synchronization failed"
    finally:
        await kernel.dispose()


# -- 7. environment -----------------------------------------------------------------------------


async def test_parent_secrets_reach_the_server_only_when_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOO_TOKEN", "parent-secret")
    monkeypatch.setenv("DSH_EXTRA", "harness")
    monkeypatch.setenv("FOO_PLAIN", "plain")
    listed = stdio(name="listed", env={"FOO_TOKEN": "given"})
    async with mounted(tmp_path, stdio(), listed) as h:
        assert text_of(await h.call("mcp__t__env", {"name": "FOO_TOKEN"})) == "<unset>"
        assert text_of(await h.call("mcp__t__env", {"name": "DSH_EXTRA"})) == "<unset>"
        assert text_of(await h.call("mcp__t__env", {"name": "FOO_PLAIN"})) == "plain"
        assert text_of(await h.call("mcp__listed__env", {"name": "FOO_TOKEN"})) == "given"


# -- mounting per scope, missing extra ----------------------------------------------------------


async def test_mount_servers_into_an_agent_scope(tmp_path: Path) -> None:
    h = await harness(tmp_path, [("tools", None)])
    try:
        other = object()
        create_scope(h.kernel.ctx, other)
        scope = create_scope(h.kernel.ctx, "session-scope")
        with pytest.raises(McpConfigError, match="serverName"):
            await mount_servers(scope.ctx, [stdio(), {"transport": "stdio", "serverName": "bad name"}])
        unmount = await mount_servers(scope.ctx, [stdio()], cwd=str(tmp_path))
        registry = h.tools
        assert "mcp__t__echo" in [d.name for d in registry.definitions("session-scope")]
        assert "mcp__t__echo" not in [d.name for d in registry.definitions(other)]
        again = await mount_servers(create_scope(h.kernel.ctx, "second").ctx, [stdio()])
        await again()
        await unmount()
        assert "mcp__t__echo" not in [d.name for d in registry.definitions("session-scope")]
        failing = [
            stdio(name="ok"),
            {**stdio(name="bad"), "command": str(tmp_path / "nope"), "failOnStartupError": True},
        ]
        with pytest.raises(RuntimeError, match=r"mcp-client\(bad\): initial connection"):
            await mount_servers(scope.ctx, failing)
        assert [d.name for d in registry.definitions("session-scope") if d.name.startswith("mcp__")] == []
    finally:
        await h.close()


async def test_unmounting_leaves_nothing_behind(tmp_path: Path) -> None:
    h = await harness(tmp_path, [("tools", None)])
    try:
        scope = create_scope(h.kernel.ctx, "session-scope")
        await (await mount_servers(scope.ctx, [stdio("--instructions", "hi")]))()
        fds, tasks = set(os.listdir("/proc/self/fd")), asyncio.all_tasks()
        effects = len(scope.ctx.fiber._effects)
        for _ in range(2):
            unmount = await mount_servers(scope.ctx, [stdio("--instructions", "hi")])
            await unmount()
        await asyncio.sleep(0)
        assert set(os.listdir("/proc/self/fd")) == fds
        assert asyncio.all_tasks() == tasks
        assert len(scope.ctx.fiber._effects) == effects
    finally:
        await h.close()


def write_servers(path: Path, servers: dict[str, Any]) -> None:
    path.write_text(json.dumps({"mcpServers": servers}))


async def test_servers_files(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {"command": sys.executable, "args": [SERVER, "--instructions", "from home"]}
    write_servers(isolated_home / "mcp.json", {"docs": entry, "my server": {**entry, "args": [SERVER, "--no-tools"]}})
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    override = {"command": sys.executable, "args": [SERVER, "--instructions", "from project"]}
    write_servers(project / ".mcp.json", {"docs": override})
    async with mounted_rows(tmp_path, ("mcp-servers", None)) as h:
        assert "mcp__docs__echo" in names(h)
        prompt = h.kernel.ctx.require(SYSTEM_PROMPT)
        text = prompt.render(await prompt.assemble(h.agent))
        assert "### MCP server: docs\n\nfrom home" in text
    async with mounted_rows(tmp_path, ("mcp-servers", {"includeProject": True})) as h:
        prompt = h.kernel.ctx.require(SYSTEM_PROMPT)
        assert "### MCP server: docs\n\nfrom project" in prompt.render(await prompt.assemble(h.agent))


def test_the_readme_example_row_is_valid() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    snippet = readme.split("### MCP servers", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    (op,) = yaml.safe_load(snippet)
    (row,) = op["insert"]
    assert row["name"] == "mcp-client"
    assert parse_config(row["config"]).serverName == "github"


def test_missing_extra_warns_once_and_runs_without_mcp_tools(tmp_path: Path) -> None:
    rows = json.dumps([["tools", None], ["mcp-client", stdio(name="a")], ["mcp-client", stdio(name="b")]])
    program = textwrap.dedent(
        f"""
        import asyncio, json, logging, sys
        sys.modules["mcp"] = None
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        from pydsh.contract.tools import TOOLS
        from pydsh.kernel import Kernel
        from tests.tools.harness import rows_of

        async def main():
            kernel = Kernel()
            await kernel.load(rows_of([tuple(r) for r in json.loads({rows!r})]))
            registry = kernel.ctx.require(TOOLS)
            print("failures", len(kernel.loader.failures), "tools", len(registry.definitions(None)))
            await kernel.dispose()

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=Path(__file__).parents[2]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "failures 0 tools 0"
    warning = (
        "mcp-client: MCP servers need the optional mcp package (pip install 'pydsh[mcp]'); running without MCP tools"
    )
    assert done.stderr.count(warning) == 1, done.stderr
