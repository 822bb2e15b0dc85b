"""The test world of spec 08 §B.12: a scripted host with two providers, Agent Teams and the plugin.

The Lead runs on ``provider-a/model-a``; teammates ``grader`` and ``coder`` are spawned by calling
``spawn_teammate`` as the Lead (tools are called the way the loop calls them: ``exec.agent`` is the
caller). Every teammate script is the same list of answers, so which teammate binds which script
does not matter.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydsh.agent.keys import AGENTS
from pydsh.contract.agent import user_message
from pydsh.contract.tools import TOOLS, ToolError, ToolExec
from pydsh.kernel.cancel import NEVER
from pydsh.llm.hooks import LLM_STREAM
from pydsh.session.keys import SESSION_QUERY
from pydsh.teams.keys import AGENT_TEAMS
from pydsh.testing import SCRIPTED_PROVIDERS, ScriptedHost, scripted_host

PLUGIN = "pydsh_team_models.plugin"
EFFORTS = ["low", "high"]
PROVIDERS = [
    {
        **SCRIPTED_PROVIDERS[0],
        "id": "provider-a",
        "models": [
            {"id": "model-a", "contextWindow": 200000, "reasoningEfforts": EFFORTS},
            {"id": "model-x", "contextWindow": 200000},
        ],
    },
    {
        **SCRIPTED_PROVIDERS[0],
        "id": "provider-b",
        "models": [{"id": "model-b", "contextWindow": 160000, "reasoningEfforts": EFFORTS}],
    },
]
TEAMS = [{"id": "agent-teams", "disabled": False}, {"id": "tool-agent-team", "disabled": False}]
ANSWERS = 40


def answers(count: int = ANSWERS) -> list[dict[str, Any]]:
    return [{"text": f"answer {i}"} for i in range(count)]


def rows(config: dict[str, Any] | None, plugin: bool) -> list[list[dict[str, Any]]]:
    patches: list[list[dict[str, Any]]] = [TEAMS]
    if plugin:
        patches.append([{"insert": [{"id": "team-models", "name": PLUGIN, "config": config or {}}]}])
    return patches


def headers(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each ``request/header.data.header.config`` of a log (R5: assert on these, never on model text)."""
    return [e["data"]["header"]["config"] for e in events if e["type"] == "request/header"]


def notices(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        data = event["data"]
        if event["type"] == "user/message" and (data.get("source") or {}).get("kind") == "model-selection":
            out.append("".join(b["text"] for b in data["content"]))
    return out


@dataclass
class World:
    """One host, its Lead and how to reach the teammates."""

    host: ScriptedHost
    lead: Any = None
    hold: dict[str, asyncio.Event] = field(default_factory=dict)
    entered: dict[str, asyncio.Event] = field(default_factory=dict)
    routes: list[tuple[str | None, str, str, str | None]] = field(default_factory=list)

    @property
    def ctx(self) -> Any:
        return self.host.ctx

    def member_id(self, name: str, lead: Any = None) -> str:
        teams = self.ctx.require(AGENT_TEAMS)
        state = teams.state((lead or self.lead).live)
        member = state.member_named(name)
        assert member is not None, name
        return str(member.id)

    def live(self, name: str, lead: Any = None) -> Any:
        return self.ctx.require(AGENTS).get(self.member_id(name, lead))

    async def events(self, name: str, lead: Any = None) -> list[dict[str, Any]]:
        read = await self.ctx.require(SESSION_QUERY).read_session(self.member_id(name, lead))
        events: list[dict[str, Any]] = read["events"]
        return events

    async def call(self, caller: Any, tool: str, args: dict[str, Any]) -> Any:
        """Run ``tool`` as ``caller`` (a host agent or a live agent); the value, or ``(code, message)``."""
        live = getattr(caller, "live", caller)
        definition = self.ctx.require(TOOLS).lookup(live, tool)
        assert definition is not None, tool
        exec = ToolExec(
            call_id=str(uuid.uuid4()),
            name=tool,
            raw_arguments=json.dumps(args),
            arguments=args,
            agent=live,
            session=live.session,
            turn=None,
            step=None,
            signal=NEVER,
            scope=live,
        )
        try:
            outcome = await definition.execute(args, exec)
        except ToolError as exc:
            return (exc.code, exc.message)
        return outcome.meta

    @asynccontextmanager
    async def holding(self, name: str, lead: Any = None) -> AsyncIterator[Any]:
        """Wake teammate ``name`` with a message and hold its model request open; yields the live teammate."""
        member_id = self.member_id(name, lead)
        self.hold[member_id], self.entered[member_id] = asyncio.Event(), asyncio.Event()
        value = await self.call(lead or self.lead, "send_message", {"target": name, "message": "hold"})
        assert value == {"sent": True}, value
        await self.entered[member_id].wait()
        try:
            yield self.live(name, lead)
        finally:
            self.hold[member_id].set()
            await settle(self)

    async def spawn(self, name: str, lead: Any = None) -> None:
        value = await self.call(
            lead or self.lead, "spawn_teammate", {"name": name, "description": name, "prompt": "go"}
        )
        assert isinstance(value, dict), value
        await settle(self)

    async def step(self, name: str, text: str = "next", lead: Any = None) -> list[dict[str, Any]]:
        """Message teammate ``name`` from the Lead and return the events its turn appended."""
        before = len(await self.events(name, lead))
        value = await self.call(lead or self.lead, "send_message", {"target": name, "message": text})
        assert value == {"sent": True}, value
        await settle(self)
        return (await self.events(name, lead))[before:]

    async def lead_turn(self, lead: Any = None) -> list[dict[str, Any]]:
        agent = (lead or self.lead).live
        start = len(agent.session.events)
        agent.followup(user_message("status?", {"kind": "user"}))
        await agent.when_idle()
        await settle(self)
        return list(agent.session.events[start:])

    def install_spy(self) -> None:
        """Record every model request's route and hold requests of sessions in ``hold`` until released."""
        world = self

        async def spy(options: dict[str, Any], nxt: Callable[[], Awaitable[Any]]) -> Any:
            session_id = options.get("sessionId")
            world.routes.append((session_id, options["provider"], options["model"], options.get("reasoningEffort")))
            event = world.hold.get(session_id or "")
            if event is not None and not event.is_set():
                world.entered[session_id or ""].set()
                await event.wait()
            return await nxt()

        self.ctx.on(LLM_STREAM, spy)

    def routes_of(self, session_id: str) -> list[tuple[str, str, str | None]]:
        return [r[1:] for r in self.routes if r[0] == session_id]


async def settle(world: World, rounds: int = 3) -> None:
    """Yield until every live agent is idle with nothing pending, ``rounds`` checks in a row."""
    calm = 0
    for _ in range(4000):
        agents = world.ctx.require(AGENTS).all()
        busy = any(a.status != "idle" or a.inbox.has_pending for a in agents)
        calm = 0 if busy else calm + 1
        if calm >= rounds:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("agents did not settle")


@asynccontextmanager
async def world(
    *,
    config: dict[str, Any] | None = None,
    plugin: bool = True,
    dsh_home: str | None = None,
    members: tuple[str, ...] = ("grader", "coder"),
    teammate_script: list[dict[str, Any]] | None = None,
    lead_session: str | None = None,
) -> AsyncIterator[World]:
    """An open host with a Lead (new, or resumed when ``lead_session`` names one) and spawned teammates."""
    script = teammate_script or answers()
    scripts = [answers()] + [list(script) for _ in range(6)]
    async with scripted_host(scripts, providers=PROVIDERS, patches=rows(config, plugin), dsh_home=dsh_home) as host:
        w = World(host)
        w.install_spy()
        if lead_session is None:
            w.lead = await host.create_agent(provider="provider-a", model="model-a")
            await w.lead_turn()
            for name in members:
                await w.spawn(name)
        else:
            w.lead = await host.resume_agent(lead_session, provider="provider-a", model="model-a")
        try:
            yield w
        finally:
            for event in w.hold.values():
                event.set()
