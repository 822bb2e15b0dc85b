"""The model lists and reads MCP resources of a real stdio server built with the ``mcp`` package."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pydsh.testing
from pydsh.apps.tui.commands import command_completions
from pydsh.mcp_resources.keys import MCP_RESOURCES
from pydsh.mcp_resources.service import render
from pydsh.testing import mcp_server
from pydsh.tools.mcp import McpServer
from tests.apps.web.conftest import open_web
from tests.tools.harness import harness

RESOURCE_TOOLS = ["list_mcp_resource_templates", "list_mcp_resources", "read_mcp_resource"]


def server_row(name: str = "t", *args: str) -> dict[str, Any]:
    config = {
        "transport": "stdio",
        "serverName": name,
        "command": sys.executable,
        "args": [mcp_server.__file__, *args],
        "toolCallTimeoutMs": 5000,
    }
    return {"id": f"mcp-{name}", "name": "mcp-client", "config": config}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def run(tmp_path: Path, script: list[Any], *rows: dict[str, Any]) -> list[dict[str, Any]]:
    """One prompt on the sdk profile with ``rows`` inserted; the session's events."""
    async with pydsh.testing.scripted_host(script, cwd=tmp_path, patches=[[{"insert": list(rows)}]]) as host:
        agent = await host.create_agent()
        await agent.run("look at the resources")
        host.assert_consumed()
    return agent.events


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == "tool/result"]


def result_text(data: dict[str, Any]) -> str:
    return "".join(b["text"] for b in data["message"]["content"])


def first_header(events: list[dict[str, Any]]) -> dict[str, Any]:
    header: dict[str, Any] = next(e for e in events if e["type"] == "request/header")["data"]["header"]
    return header


async def test_the_tools_and_their_section_exist_only_with_a_server(tmp_path: Path) -> None:
    events = await run(tmp_path, [{"text": "none"}])
    assert not set(RESOURCE_TOOLS) & {t["name"] for t in first_header(events)["tools"]}
    events = await run(tmp_path, [{"text": "some"}], server_row("docs"), server_row("wiki"))
    tools = {t["name"]: t for t in first_header(events)["tools"]}
    assert set(RESOURCE_TOOLS) <= set(tools)
    assert tools["list_mcp_resources"]["parameters"] == {
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "Name of a configured MCP server."},
            "cursor": {
                "type": "string",
                "description": "The continuation cursor this server returned with the previous page.",
            },
        },
        "required": ["server"],
    }
    assert tools["read_mcp_resource"]["parameters"]["required"] == ["server", "uri"]
    system = next(e for e in events if e["type"] == "system/message")["data"]["message"]["content"][0]["text"]
    assert (
        "## MCP resource servers\n\nTo list or read what these MCP servers publish, pass one of their names as the "
        'server argument of list_mcp_resources, list_mcp_resource_templates or read_mcp_resource: ["docs", "wiki"].'
    ) in system


async def test_listing_pages_templates_and_reading_text_and_binary(tmp_path: Path) -> None:
    script = [
        call("list_mcp_resources", server="t"),
        call("list_mcp_resources", server="t", cursor="1"),
        call("list_mcp_resource_templates", server="t"),
        call("read_mcp_resource", server="t", uri="memo://notes"),
        call("read_mcp_resource", server="t", uri="memo://logo.png"),
        call("read_mcp_resource", server="t", uri="memo://notes/monday"),
        {"text": "read"},
    ]
    first, second, templates, text, binary, templated = results(await run(tmp_path, script, server_row()))
    # The reference's texts for this server, but for the response metadata newer servers attach (``_meta``,
    # ``ttlMs``, ``cacheScope``), which its client passes through and the Python mcp client keeps to itself.
    head = "MCP server: t\n{"
    notes = '{"name":"notes","uri":"memo://notes","description":"Meeting notes.","mimeType":"text/plain"}'
    logo = '{"name":"logo","uri":"memo://logo.png","mimeType":"image/png"}'
    # Without a cursor every page is gathered, as the reference's client does.
    assert result_text(first) == f'{head}"resources":[{notes},{logo}]}}'
    assert result_text(second) == f'{head}"resources":[{logo}]}}'
    assert (
        result_text(templates)
        == f'{head}"resourceTemplates":[{{"name":"notes-of-day","uriTemplate":"memo://notes/{{day}}"}}]}}'
    )
    assert result_text(text) == (
        f'{head}"contents":[{{"uri":"memo://notes","mimeType":"text/plain","text":"Ship on Friday."}}]}}'
    )
    length = len(mcp_server.PNG_1PX)
    assert result_text(binary) == (
        f'{head}"contents":[{{"uri":"memo://logo.png","mimeType":"image/png","blob":"[binary resource: '
        f'{length} base64 characters; available to programmatic callers]"}}]}}'
    )
    assert binary["meta"]["contents"][0]["blob"] == mcp_server.PNG_1PX
    assert "Notes of monday." in result_text(templated)


async def test_failures_name_the_server_or_the_mcp_error(tmp_path: Path) -> None:
    script = [
        call("read_mcp_resource", server="nope", uri="memo://notes"),
        call("read_mcp_resource", server="t", uri="memo://missing"),
        {"text": "failed"},
    ]
    unknown, missing = results(await run(tmp_path, script, server_row()))
    assert result_text(unknown) == 'Error: MCP resource server "nope" is unavailable in this agent\'s scope'
    assert result_text(missing) == "Error: unknown resource memo://missing"
    assert unknown["message"]["isError"] is missing["message"]["isError"] is True


def test_blobs_are_replaced_wherever_they_are_nested() -> None:
    value = {"contents": [{"blob": "QUJD", "nested": {"blob": "AA=="}}, {"blob": 3}]}
    assert json.loads(render("s", value).split("\n", 1)[1]) == {
        "contents": [
            {
                "blob": "[binary resource: 4 base64 characters; available to programmatic callers]",
                "nested": {"blob": "[binary resource: 4 base64 characters; available to programmatic callers]"},
            },
            {"blob": 3},
        ]
    }


# -- prompts as commands ------------------------------------------------------------------------


def commands(events: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(e["type"], e["data"]) for e in events if e["type"] in ("command/run", "command/done")]


def user_texts(events: list[dict[str, Any]]) -> list[str]:
    return [
        "".join(b.get("text", "") for b in e["data"]["content"])
        for e in events
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"
    ]


async def prompt_run(tmp_path: Path, script: list[Any], *prompts: str) -> list[dict[str, Any]]:
    """Each of ``prompts`` as a turn of one agent on the sdk profile with the test server ``t``."""
    patch = [{"insert": [server_row()]}]
    async with pydsh.testing.scripted_host(script, cwd=tmp_path, patches=[patch]) as host:
        agent = await host.create_agent()
        for prompt in prompts:
            await agent.run(prompt)
        host.assert_consumed()
    return agent.events


async def test_a_prompt_command_sends_the_servers_prompt_to_the_model(tmp_path: Path) -> None:
    events = await prompt_run(
        tmp_path, [{"text": "reviewed"}, {"text": "summarised"}], "/mcp__t__review error handling", "/mcp__t__standup"
    )
    assert user_texts(events) == [
        "Review the change, looking hard at error handling.",
        "Summarise what was done yesterday.",
    ]
    (run, first), (done, outcome) = commands(events)[:2]
    assert (run, done) == ("command/run", "command/done")
    assert first == {
        "commandId": first["commandId"],
        "name": "mcp__t__review",
        "source": {"kind": "user"},
        "args": "error handling",
    }
    assert outcome == {"commandId": first["commandId"], "kind": "success", "text": 'MCP prompt "review" of server t'}
    answers = [e for e in events if e["type"] == "assistant/message"]
    assert len(answers) == 2


async def test_a_failing_prompt_command_skips_the_model_and_an_unknown_one_is_a_plain_prompt(tmp_path: Path) -> None:
    script = [{"text": "reviewed"}, {"text": "not a command"}]
    events = await prompt_run(tmp_path, script, "/mcp__t__review", "/mcp__t__review focus=tests", "/mcp__t__nothing")
    done = [data for kind, data in commands(events) if kind == "command/done"]
    assert done[0]["kind"] == "error" and done[0]["text"] == "missing argument focus: /mcp__t__review <focus>"
    assert done[1]["kind"] == "success"
    assert user_texts(events)[0] == "Review the change, looking hard at tests."
    assert user_texts(events)[1:] == ["/mcp__t__nothing"]
    answers = [e["data"]["message"]["content"] for e in events if e["type"] == "assistant/message"]
    assert answers == [[{"type": "text", "text": "reviewed"}], [{"type": "text", "text": "not a command"}]]


async def test_closing_the_last_server_withdraws_the_tools_and_its_commands(tmp_path: Path) -> None:
    rows = [
        ("tools", None),
        ("pydsh.mcp_resources.service", None),
        ("mcp-client", server_row("a")["config"]),
        ("mcp-client", server_row("b")["config"]),
    ]
    h = await harness(tmp_path, rows)
    try:
        service = h.kernel.ctx.require(MCP_RESOURCES)
        servers = {
            f.instance.server_name: f.instance for f in h.kernel.ctx.fiber.children if isinstance(f.instance, McpServer)
        }
        assert [c.name for c in service.commands(h.agent)] == [
            "mcp__a__review",
            "mcp__a__standup",
            "mcp__b__review",
            "mcp__b__standup",
        ]

        def tools() -> list[str]:
            return [d.name for d in h.tools.definitions(h.agent) if d.name in RESOURCE_TOOLS]

        assert tools() == RESOURCE_TOOLS
        await servers["a"].close()
        assert tools() == RESOURCE_TOOLS
        assert "MCP server: b" in await h.text("list_mcp_resources", {"server": "b"})
        assert [c.name for c in service.commands(h.agent)] == ["mcp__b__review", "mcp__b__standup"]
        await servers["b"].close()
        assert tools() == [] and service.commands(h.agent) == []
    finally:
        await h.close()


# -- the frontends' command lists ---------------------------------------------------------------


async def test_the_web_page_and_the_terminal_list_the_prompt_commands(tmp_path: Path, isolated_home: Path) -> None:
    patches = [[{"insert": [server_row()]}]]
    async for web in open_web([{"text": "unused"}], isolated_home, tmp_path, patches=patches):
        info = (await web.client.get("/api/info")).json()
        assert info["commands"][-2:] == [
            {"name": "mcp__t__review", "description": "Review the current change."},
            {"name": "mcp__t__standup", "description": "Summarise yesterday's work."},
        ]
        prompts = web.host.prompt_commands()
        assert prompts == {
            "/mcp__t__review": "Review the current change.",
            "/mcp__t__standup": "Summarise yesterday's work.",
        }
        offered = [(c.value, c.help) for c in command_completions("/mcp", prompts)]
        assert offered == list(prompts.items())
        assert [c.value for c in command_completions("/co", prompts)] == ["/compact", "/copy"]


async def test_the_project_instructions_follow_a_prompt_command_as_they_follow_a_prompt(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Always run the tests.\n")
    events = await prompt_run(tmp_path, [{"text": "done"}], "/mcp__t__standup")
    entered = [e["data"] for e in events if e["type"] == "user/message"]
    kinds = [m["source"]["kind"] for m in entered]
    assert kinds[:2] == ["user", "agent-instructions"]
    assert entered[0]["content"] == [{"type": "text", "text": "Summarise what was done yesterday."}]
    assert "Always run the tests." in json.dumps(entered[1]["content"])
