"""A real kernel, a live session with an open step and a fake agent, for driving tools through the pipeline."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from pydsh.agent.hooks import AGENT_CREATED
from pydsh.contract.agent import AgentOptions
from pydsh.contract.tools import TOOLS, ToolExec, ToolOutcome
from pydsh.kernel import AbortController, Kernel, create_scope
from pydsh.kernel.compose import Row
from pydsh.session.events import make_header
from pydsh.session.keys import SESSIONS
from pydsh.session.log import Session
from pydsh.tools.registry import ToolRegistry

FS = [("tools", None), ("tool-fs", None), ("fs-observation-policy", None)]
POLICY = [("sandbox-policy", None), ("approval", None), ("permission", None)]
BASE = [("session", None), ("system-prompt", None), ("working-directory", None)]


class FakeAgent:
    """Satisfies the Agent protocol as far as tools use it; records delivered messages."""

    def __init__(self, session: Session, ctx: Any) -> None:
        self.id = session.id
        self.session = session
        self.ctx = ctx
        self.options = AgentOptions()
        self.status = "running"
        self.followups: list[dict[str, Any]] = []
        self.steers: list[dict[str, Any]] = []
        self.injected: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any], target: str, wakeup: bool) -> None:
        (self.followups if target == "next-turn" else self.steers if wakeup else self.injected).append(message)

    def followup(self, message: dict[str, Any]) -> None:
        self.followups.append(message)

    def steer(self, message: dict[str, Any]) -> None:
        self.steers.append(message)

    def inject(self, message: dict[str, Any]) -> None:
        self.injected.append(message)


class Harness:
    """One composed world with one agent whose session has turn 1, step 1 open."""

    def __init__(self, kernel: Kernel, session: Session, agent: FakeAgent) -> None:
        self.kernel = kernel
        self.session = session
        self.agent = agent
        self.controller = AbortController()
        self._ids = itertools.count(1)

    @property
    def tools(self) -> ToolRegistry:
        registry: ToolRegistry = self.kernel.ctx.require(TOOLS)
        return registry

    def exec(self, name: str, args: Any = None, *, raw: str | None = None) -> ToolExec:
        raw_text = raw if raw is not None else ("" if args is None else json.dumps(args))
        if raw_text == "":
            parsed: Any = {}
        else:
            try:
                parsed = json.loads(raw_text)
            except ValueError:
                parsed = raw_text
        call_id = f"call-{next(self._ids)}"
        return ToolExec(
            call_id=call_id,
            name=name,
            raw_arguments=raw_text,
            arguments=parsed,
            agent=self.agent,  # type: ignore[arg-type]
            session=self.session,
            turn=self.session.open_turn,
            step=self.session.open_step,
            signal=self.controller.signal,
            scope=self.agent,
        )

    async def run(self, exec: ToolExec) -> ToolOutcome:
        inv = self.tools.invocation(exec)
        await inv.prepare()
        await inv.execute()
        return await inv.commit()

    async def call(self, name: str, args: Any = None, *, raw: str | None = None) -> ToolOutcome:
        return await self.run(self.exec(name, args, raw=raw))

    async def text(self, name: str, args: Any = None) -> str:
        outcome = await self.call(name, args)
        return "".join(b["text"] for b in outcome.content if b["type"] == "text")

    def events(self, *types: str) -> list[dict[str, Any]]:
        return [e for e in self.session.events if not types or e["type"] in types]

    def next_step(self) -> None:
        """Close the open step and open the next one."""
        turn, step = self.session.open_turn, self.session.open_step
        assert turn is not None and step is not None
        self.session.append("step/end", {"turn": turn, "step": step})
        self.session.append("step/start", {"turn": turn, "step": step + 1})

    async def close(self) -> None:
        await self.kernel.dispose()


def rows_of(plugins: list[tuple[str, Any]]) -> list[Row]:
    return [Row(id=name, name=name, config=config) for name, config in plugins]


async def harness(
    cwd: Path,
    plugins: list[tuple[str, Any]],
    *,
    startup: bool = False,
    open_turn: bool = True,
    header: dict[str, Any] | None = None,
) -> Harness:
    """Load ``BASE + plugins``, create the session and agent, optionally dispatch ``agent/created``."""
    kernel = Kernel()
    await kernel.load(rows_of(BASE + plugins))
    failed = [f"{f.row_id}: {f.error}" for f in kernel.loader.failures]
    assert not failed, failed
    store = kernel.ctx.require(SESSIONS)
    session = store.new(header or make_header("s-1", 1, cwd=str(cwd)))
    agent = FakeAgent(session, None)
    scope = create_scope(kernel.ctx, agent)
    agent.ctx = scope.ctx
    session.scope = agent
    if startup:
        await kernel.ctx.serial(AGENT_CREATED, {"agent": agent, "source": "startup", "signal": None}, scope=agent)
    if open_turn:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
    return Harness(kernel, session, agent)


def text_of(outcome: ToolOutcome) -> str:
    return "".join(b["text"] for b in outcome.content if b["type"] == "text")
