"""The ``agents`` service: live agents, the initiator context, and the create/resume façade (spec 03 §2.1)."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydsh.agent.hooks import AGENT_DISPOSED, AgentRef
from pydsh.agent.keys import AGENTS
from pydsh.contract.agent import Agent, AgentOptions
from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer

if TYPE_CHECKING:
    from pydsh.kernel.cancel import AbortSignal
    from pydsh.session.events import Event

T = TypeVar("T")


_INITIATOR: contextvars.ContextVar[Agent | None] = contextvars.ContextVar("pydsh_initiator", default=None)

Setup = Callable[[Context, Agent], Any]
Keeper = Callable[[Agent], bool]
"""Whether an idle agent has work ahead that needs it live (an armed reminder, a goal's next round)."""


@dataclass
class CreateAgentOptions:
    """What a new agent is made from (spec 03 §2.1)."""

    session_id: str | None = None
    cwd: str | None = None
    parent_session: str | None = None
    origin: str | None = None
    delegation_depth: int = 0
    agent_preset: str | None = None
    prefix_events: list[Event] = field(default_factory=list)
    inherited_event_count: int = 0
    agent_options: AgentOptions = field(default_factory=AgentOptions)
    setup: Setup | None = None
    signal: AbortSignal | None = None


class AgentHandle(Protocol):
    @property
    def agent(self) -> Agent: ...

    async def dispose(self) -> None: ...

    async def abandon(self) -> None:
        """Roll back an agent that was never established: dispose it without keeping its log."""


class AgentFactory(Protocol):
    async def create(self, opts: CreateAgentOptions) -> AgentHandle: ...

    async def resume(
        self,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        signal: AbortSignal | None = None,
    ) -> AgentHandle: ...


class AgentRegistry:
    """Live agents by id and the factory that makes them."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._agents: dict[str, Agent] = {}
        self._handles: dict[str, AgentHandle] = {}
        self._factory: AgentFactory | None = None
        self._keepers: list[Keeper] = []

    def set_factory(self, ctx: Context, factory: AgentFactory) -> Disposer:
        self._factory = factory

        def remove() -> None:
            if self._factory is factory:
                self._factory = None

        return ctx.register(remove)

    def _require_factory(self) -> AgentFactory:
        if self._factory is None:
            raise RuntimeError("no agent loop is composed (the agents service has no factory)")
        return self._factory

    async def create(self, opts: CreateAgentOptions) -> AgentHandle:
        return await self._require_factory().create(opts)

    async def resume(
        self,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        signal: AbortSignal | None = None,
    ) -> AgentHandle:
        return await self._require_factory().resume(
            resume_session_id, agent_options=agent_options, setup=setup, signal=signal
        )

    def enter(self, agent: Agent, handle: AgentHandle) -> None:
        if agent.id in self._agents:
            raise ValueError(f'agent "{agent.id}" is already live')
        self._agents[agent.id] = agent
        self._handles[agent.id] = handle

    def leave(self, agent: Agent) -> None:
        if self._agents.get(agent.id) is agent:
            del self._agents[agent.id]
            self._handles.pop(agent.id, None)
            self.ctx.emit(AGENT_DISPOSED, AgentRef(agent=agent), scope=agent)

    def get(self, agent_id: str) -> Agent | None:
        return self._agents.get(agent_id)

    def add_keeper(self, ctx: Context, keeper: Keeper) -> Disposer:
        """Hold idle agents live while ``keeper`` says so: a frontend that lets idle agents go asks
        :meth:`kept` first. Unwinds with ``ctx``."""
        self._keepers.append(keeper)

        def remove() -> None:
            if keeper in self._keepers:
                self._keepers.remove(keeper)

        return ctx.register(remove)

    def kept(self, agent: Agent) -> bool:
        """Whether a plugin needs ``agent`` live for work ahead."""
        return any(keeper(agent) for keeper in self._keepers)

    def handle(self, agent_id: str) -> AgentHandle | None:
        return self._handles.get(agent_id)

    def all(self) -> list[Agent]:
        return list(self._agents.values())

    # -- initiator ---------------------------------------------------------------------------

    def current_initiator(self) -> Agent | None:
        return _INITIATOR.get()

    def require_initiator(self) -> Agent:
        agent = _INITIATOR.get()
        if agent is None:
            raise RuntimeError("no agent initiated this operation")
        return agent

    async def with_initiator(self, agent: Agent | None, op: Callable[[], Awaitable[T]]) -> T:
        token = _INITIATOR.set(agent)
        try:
            return await op()
        finally:
            _INITIATOR.reset(token)

    async def without_initiator(self, op: Callable[[], Awaitable[T]]) -> T:
        return await self.with_initiator(None, op)


name = "agent"


def apply(ctx: Context, config: None) -> None:
    ctx.provide(AGENTS, AgentRegistry(ctx))
