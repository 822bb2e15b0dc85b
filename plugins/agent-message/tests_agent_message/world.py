"""The test world of 09 §8: one scripted host with roots, a fork, a subagent, a gate tool and archived ids.

Also two test plugins loaded by import path: ``gate`` (a tool that holds a turn open until the test
releases it, so a session can be observed ``running``) and a ``workspace_registry`` with a settable
archive.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydsh import Agent as HostAgent
from pydsh.agent.keys import AGENTS
from pydsh.agent.registry import AgentHandle, CreateAgentOptions
from pydsh.contract.agent import AgentOptions
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolExec, ToolOutcome
from pydsh.kernel.cancel import NEVER
from pydsh.kernel.context import Context
from pydsh.kernel.keys import ServiceKey
from pydsh.session.events import build_event
from pydsh.session.keys import SESSION_QUERY, SESSIONS
from pydsh.session.log import now_ms
from pydsh.testing import ScriptedHost, scripted_host

DESCRIPTOR = {"version": 3, "mode": "continuable", "provider": "spawn", "label": "helper"}
PLUGIN = "pydsh_agent_message.plugin"
HERE = "tests_agent_message.world"
ARCHIVED: set[str] = set()
GATES: dict[str, asyncio.Event] = {}
ENTERED: dict[str, asyncio.Event] = {}


def gate_event(table: dict[str, asyncio.Event], key: str) -> asyncio.Event:
    return table.setdefault(key, asyncio.Event())


async def gate(args: Any, exec: ToolExec) -> str:
    """Hold the calling turn open until the test opens the gate named ``args["name"]``."""
    gate_event(ENTERED, args["name"]).set()
    await gate_event(GATES, args["name"]).wait()
    return "gate opened"


class Archive:
    """A ``workspace_registry`` whose archived ids are the module's ``ARCHIVED`` set."""

    def archived_session_ids(self) -> set[str]:
        return set(ARCHIVED)


def gate_plugin(ctx: Context, config: None) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    ctx.require(TOOLS).register(ctx, ToolDefinition("gate", "Waits for the test.", schema, gate))


gate_plugin.inject = (TOOLS,)  # type: ignore[attr-defined]


def archive_plugin(ctx: Context, config: None) -> None:
    ctx.provide(ServiceKey("workspace_registry"), Archive())


def gate_call(name: str) -> dict[str, Any]:
    """A script entry that calls the gate tool."""
    return {"tool_calls": [{"name": "gate", "arguments": {"name": name}}]}


def text(value: str = "ok") -> dict[str, Any]:
    return {"text": value}


def new_id() -> str:
    return str(uuid.uuid4())


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted model step that calls one tool."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def relay_text(sender: str, content: str) -> list[dict[str, Any]]:
    """The exact content of a relay message from ``sender`` (09 §4.1)."""
    header = f'<dsh-agent-message>{{"senderSessionId":"{sender}"}}</dsh-agent-message>'
    return [{"type": "text", "text": f"{header}\n\n{content}"}]


@dataclass
class World:
    """One host and its sessions; tools are called the way the loop calls them (exec.agent = caller)."""

    host: ScriptedHost
    resumes: list[dict[str, Any]] = field(default_factory=list)
    disposed: list[str] = field(default_factory=list)
    fail_resume: list[Exception] = field(default_factory=list)

    @property
    def ctx(self) -> Context:
        return self.host.ctx

    async def root(self, session_id: str | None = None) -> HostAgent:
        return await self.host.create_agent(session_id=session_id)

    async def offline(self, session_id: str | None = None) -> str:
        """A root session that exists only on disk."""
        agent = await self.root(session_id)
        sid = agent.session_id
        await agent.close()
        return sid

    async def fork(self, source: HostAgent) -> Any:
        """An ordinary fork of ``source``: inherits its log, header has ``parentSession`` but no origin."""
        sessions = self.ctx.require(SESSIONS)
        prefix = sessions.fork_prefix(source.live.session)
        handle = await self.ctx.require(AGENTS).create(
            CreateAgentOptions(
                parent_session=source.session_id,
                prefix_events=prefix,
                inherited_event_count=next(e["seq"] for e in prefix if e["type"] == "session/end-seed"),
                cwd=self.host.cwd,
            )
        )
        return handle.agent

    async def subagent(self, parent: HostAgent) -> Any:
        """A live subagent of ``parent`` (header ``origin: "subagent"``)."""
        handle = await self.ctx.require(AGENTS).create(
            CreateAgentOptions(
                parent_session=parent.session_id,
                origin="subagent",
                delegation_depth=1,
                cwd=self.host.cwd,
                prefix_events=[build_event("subagent/descriptor", 0, now_ms(), DESCRIPTOR)],
            )
        )
        return handle.agent

    def live(self, session_id: str) -> Any:
        return self.ctx.require(AGENTS).get(session_id)

    async def call(self, caller: Any, tool: str, args: dict[str, Any]) -> ToolOutcome:
        """Run ``tool`` for ``caller`` (a host agent, a live agent or ``None``); rejections raise ``ToolError``."""
        live = caller.live if isinstance(caller, HostAgent) else caller
        definition = self.ctx.require(TOOLS).lookup(live, tool)
        assert definition is not None, tool
        exec = ToolExec(
            call_id=new_id(),
            name=tool,
            raw_arguments=json.dumps(args),
            arguments=args,
            agent=live,
            session=live.session if live is not None else None,
            turn=None,
            step=None,
            signal=NEVER,
            scope=live,
        )
        outcome: ToolOutcome = await definition.execute(args, exec)
        return outcome

    async def send(self, caller: Any, to: str, content: str = "ping", **extra: Any) -> dict[str, Any]:
        value: dict[str, Any] = (
            await self.call(caller, "send_agent_message", {"to": to, "content": content, **extra})
        ).meta
        return value

    async def check(self, caller: Any, to: str, message_id: str | None = None) -> dict[str, Any]:
        args = {"to": to} if message_id is None else {"to": to, "messageId": message_id}
        value: dict[str, Any] = (await self.call(caller, "check_delivery", args)).meta
        return value

    async def events(self, session_id: str) -> list[dict[str, Any]]:
        read = await self.ctx.require(SESSION_QUERY).read_session(session_id)
        events: list[dict[str, Any]] = read["events"]
        return events

    def spy_resume(self) -> None:
        """Record every ``agents.resume`` (failing it while ``fail_resume`` holds errors) and handle disposal."""
        registry = self.ctx.require(AGENTS)
        original = registry.resume
        world = self

        async def resume(session_id: str, *, agent_options: AgentOptions | None = None, **kw: Any) -> AgentHandle:
            world.resumes.append({"id": session_id, "options": agent_options, **kw})
            await asyncio.sleep(0)
            if world.fail_resume:
                raise world.fail_resume.pop(0)
            handle = await original(session_id, agent_options=agent_options, **kw)
            return Recorded(handle, world.disposed)

        registry.resume = resume


class Recorded:
    """An agent handle that notes its disposal."""

    def __init__(self, inner: AgentHandle, disposed: list[str]) -> None:
        self.inner = inner
        self.log = disposed

    @property
    def agent(self) -> Any:
        return self.inner.agent

    async def dispose(self) -> None:
        self.log.append(self.inner.agent.id)
        await self.inner.dispose()

    async def abandon(self) -> None:
        await self.inner.abandon()


def rows(config: dict[str, Any] | None = None, *, plugin: bool = True) -> list[dict[str, Any]]:
    """The patch rows: the plugin (by import path), the gate tool and the archive."""
    out: list[dict[str, Any]] = [
        {"id": "agent-message-gate", "name": f"{HERE}:gate_plugin"},
        {"id": "agent-message-archive", "name": f"{HERE}:archive_plugin"},
    ]
    if plugin:
        out.insert(0, {"id": "agent-message", "name": PLUGIN, "config": config or {}})
    return out


@asynccontextmanager
async def world(
    scripts: list[list[dict[str, Any]]],
    *,
    config: dict[str, Any] | None = None,
    plugin: bool = True,
    dsh_home: str | None = None,
    cwd: str | None = None,
) -> AsyncIterator[World]:
    """An open scripted host with the plugin; gates are opened before it closes."""
    ARCHIVED.clear()
    GATES.clear()
    ENTERED.clear()
    async with scripted_host(
        scripts, patches=[[{"insert": rows(config, plugin=plugin)}]], dsh_home=dsh_home, cwd=cwd
    ) as host:
        try:
            yield World(host)
        finally:
            for event in GATES.values():
                event.set()


async def until(predicate: Callable[[], Any], rounds: int = 2000) -> None:
    """Yield to the event loop until ``predicate()`` holds (bounded by rounds, not by time)."""
    for _ in range(rounds):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never held")


async def entered(name: str) -> None:
    """Wait until a turn is inside gate ``name``."""
    await gate_event(ENTERED, name).wait()


def release(name: str) -> None:
    gate_event(GATES, name).set()


async def wait_file(args: Any, exec: ToolExec) -> str:
    """Write ``args["ready"]``, then hold the turn open until ``args["release"]`` exists (other processes)."""
    Path(args["ready"]).write_text("ready")
    while not Path(args["release"]).exists():
        await asyncio.sleep(0.01)
    return "released"


def file_gate_plugin(ctx: Context, config: None) -> None:
    schema = {
        "type": "object",
        "properties": {"ready": {"type": "string"}, "release": {"type": "string"}},
        "required": ["ready", "release"],
    }
    ctx.require(TOOLS).register(ctx, ToolDefinition("wait_file", "Waits for a file.", schema, wait_file))


file_gate_plugin.inject = (TOOLS,)  # type: ignore[attr-defined]
