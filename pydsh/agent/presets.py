"""The ``agent_presets`` roster: standing mounts, generations, joins and the realm audit (spec 10 §1, §5).

Each declaration (an ``agent-preset`` row) is mounted eagerly under a standing scope key: that
mounted tree is a *generation*. An agent joins a preset by having its scope key parented to the
generation's key, so the preset's tools, sections and listeners apply to it. A changed or
removed declaration retires its generation, which is unloaded once no joined agent uses it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from pydsh.agent.hooks import AGENT_CREATED, AGENT_DISPOSED, PROMPT_ASSEMBLE, AgentCreated, PromptAssemble
from pydsh.agent.keys import AGENT_PRESETS
from pydsh.contract.tools import TOOLS_CHANGED
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import SERVICE_PROVIDED, Context, Realm
from pydsh.kernel.errors import KernelError, PydshError
from pydsh.kernel.events import Next
from pydsh.kernel.fiber import ACTIVE, DISPOSED, FAILED, PENDING, Disposer, Fiber
from pydsh.kernel.keys import INVARIANTS, ServiceKey
from pydsh.session.keys import SESSION_PROJECTIONS
from pydsh.session.projections import Wire

if TYPE_CHECKING:
    from pydsh.agent.prompt import PromptAssembly
    from pydsh.kernel.invariants import Invariants
    from pydsh.session.log import Session
    from pydsh.session.projections import SessionProjections

T = TypeVar("T")

log = logging.getLogger("pydsh.agent.presets")


UNJOINED_WARNING = (
    'agent "{id}" was published without joining an agent preset; its tools, prompt sections, and skill catalog '
    "resolve against the empty global layer (join through agent_presets.mount() or compose_from() in the agent "
    "factory setup)"
)
UNJOINED_FAILURE = (
    'agent "{id}" addressed a model without joining any agent preset while a roster is composed; its tools, prompt '
    "sections, and skill catalog resolve against the empty global layer"
)
LATE_SERVICE_FAILURE = (
    'preset "{id}" published process-global service(s) [{names}] after its mount was audited (observed while '
    'notifying "{service}") — a preset service must sit behind an `isolate` realm or move to the host composition'
)


class RemoteError(PydshError):
    """A roster failure a client may see: a stable ``code`` and one clear message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class PresetConfig(BaseModel):
    """One ``agent-preset`` declaration row (spec 10 §1.2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str | None = None
    description: str | None = None
    order: float | None = None
    plugins: list[dict[str, Any]] = Field(default_factory=list)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    default: str = "standard"


class StandingKey:
    """The scope key of one generation: joined agents are parented to it."""

    __slots__ = ("preset_id", "number")

    def __init__(self, preset_id: str, number: int) -> None:
        self.preset_id = preset_id
        self.number = number

    def __repr__(self) -> str:
        return f"<preset {self.preset_id} generation {self.number}>"


@dataclass(eq=False)
class Generation:
    """One mounted tree of a declaration."""

    preset_id: str
    key: StandingKey
    fiber: Fiber
    problems: list[str] = field(default_factory=list)
    members: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)
    retired: bool = False
    diagnostics: list[str] | None = None
    audited_services: frozenset[str] = frozenset()


@dataclass(eq=False)
class Declaration:
    config: PresetConfig
    current: Generation


def resolve_session_preset(session: Session) -> str | None:
    """The preset a session runs: its last ``agent-preset/selected``, else its header ``agentPreset``."""
    for event in reversed(session.events):
        if event["type"] == "agent-preset/selected":
            return str(event["data"]["agentPreset"])
    preset = session.header.get("agentPreset")
    return str(preset) if preset is not None else None


def _descends(fiber: Fiber | None, ancestor: Fiber) -> bool:
    while fiber is not None:
        if fiber is ancestor:
            return True
        fiber = fiber.parent
    return False


def _subtree(fiber: Fiber) -> list[Fiber]:
    out = []
    for child in fiber.children:
        out.append(child)
        out.extend(_subtree(child))
    return out


class AgentPresets:
    """The ``agent_presets`` service (spec 10 §1.3)."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self._declarations: dict[str, Declaration] = {}
        self._joined: weakref.WeakKeyDictionary[Any, Generation] = weakref.WeakKeyDictionary()
        self._generations: list[Generation] = []
        self._locks: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._counter = 0
        self._pending_unloads: set[asyncio.Task[None]] = set()

    @property
    def default_id(self) -> str:
        return self.config.default

    @property
    def configured(self) -> bool:
        """A roster is configured: this service holds at least one declaration."""
        return bool(self._declarations)

    # -- declarations and generations -----------------------------------------------------------

    async def declare(self, ctx: Context, config: PresetConfig) -> Disposer:
        """Register a declaration and mount its first generation; an effect of ``ctx``'s fiber."""
        if config.id in self._declarations:
            raise RemoteError("agent-preset/duplicate", f"Duplicate agent preset: {config.id}")
        declaration = Declaration(config, self._mount(ctx.fiber.row_id, config))
        self._declarations[config.id] = declaration
        await self.ctx.runtime.loader.settle()

        async def withdraw() -> None:
            if self._declarations.get(config.id) is declaration:
                del self._declarations[config.id]
            await self._retire(declaration.current)

        return ctx.register(withdraw)

    def _mount(self, row_id: str, config: PresetConfig) -> Generation:
        from pydsh.kernel.compose import IncludeResolver, parse_rows, resolve_rows

        self._counter += 1
        key = StandingKey(config.id, self._counter)
        fiber = Fiber(f"{row_id}/generation-{self._counter}", "agent-preset", self.ctx.fiber)
        fiber.state = ACTIVE
        gctx = self.ctx.child(fiber, scope=key)
        generation = Generation(config.id, key, fiber)
        try:
            rows = resolve_rows(
                parse_rows(copy.deepcopy(config.plugins), f'agent preset "{config.id}"', IncludeResolver())
            )
        except KernelError as exc:
            generation.problems.append(str(exc))
            rows = []
        self.ctx.runtime.loader.add_rows(gctx, rows)
        self._generations.append(generation)
        return generation

    async def _retire(self, generation: Generation) -> None:
        generation.retired = True
        if not generation.members:
            await self._unload(generation)

    async def _unload(self, generation: Generation) -> None:
        if generation in self._generations:
            self._generations.remove(generation)
        errors = await self.ctx.runtime.loader.dispose(generation.fiber)
        for error in errors:
            log.warning('unloading preset "%s" generation failed: %s', generation.preset_id, error)

    def _declaration(self, preset_id: str | None) -> Declaration:
        wanted = preset_id or self.default_id
        declaration = self._declarations.get(wanted)
        if declaration is None:
            raise RemoteError("agent-preset/not-found", f"Unknown agent preset: {wanted}")
        return declaration

    # -- the realm audit ------------------------------------------------------------------------

    def _root_services(self, generation: Generation) -> list[str]:
        root = self.ctx.runtime.root_realm
        return sorted(n for n in root.names() if _descends(root.owners.get(n), generation.fiber))

    def diagnostics(self, generation: Generation) -> list[str]:
        """Why ``generation`` cannot compose a session (empty when it can); final once loading settled."""
        if generation.diagnostics is not None:
            return generation.diagnostics
        loader = self.ctx.runtime.loader
        lines = list(generation.problems)
        for fiber in _subtree(generation.fiber):
            if fiber.state == FAILED:
                lines.append(f'row "{fiber.row_id}" ({fiber.plugin_name}): {fiber.error}')
            elif fiber.state == PENDING:
                missing = ", ".join(loader.missing_services(fiber)) or "its services"
                lines.append(f'row "{fiber.row_id}" ({fiber.plugin_name}) never activated: waiting for {missing}')
        services = self._root_services(generation)
        if services:
            lines.append(
                f"publishes process-global service(s) [{', '.join(services)}]; a preset service must sit in a "
                "pydsh:group with isolate for it"
            )
        if loader.idle:
            generation.diagnostics = lines
            generation.audited_services = frozenset(services)
        return lines

    def _broken(self, declaration: Declaration) -> str | None:
        lines = self.diagnostics(declaration.current)
        return "\n".join(lines) if lines else None

    def late_services(self, service: str, realm: Realm, fiber: Fiber) -> str | None:
        """The failure message when an audited generation published a root-realm service later."""
        if realm is not self.ctx.runtime.root_realm:
            return None
        for generation in self._generations:
            if generation.diagnostics is None or not _descends(fiber, generation.fiber):
                continue
            late = [n for n in self._root_services(generation) if n not in generation.audited_services]
            if late:
                return LATE_SERVICE_FAILURE.format(id=generation.preset_id, names=", ".join(late), service=service)
        return None

    # -- reading --------------------------------------------------------------------------------

    def list(self) -> list[dict[str, Any]]:
        """Every declaration, sorted by ``order`` (missing last) then id."""
        out = []
        for preset_id, declaration in self._declarations.items():
            config = declaration.config
            item: dict[str, Any] = {"id": preset_id}
            for key in ("name", "description", "order"):
                value = getattr(config, key)
                if value is not None:
                    item[key] = value
            broken = self._broken(declaration)
            if broken:
                item["broken"] = broken
            out.append(item)
        return sorted(out, key=lambda d: (d.get("order") is None, d.get("order") or 0, d["id"]))

    def resolve(self, preset_id: str | None = None) -> dict[str, Any]:
        declaration = self._declaration(preset_id)
        out: dict[str, Any] = {"id": declaration.config.id}
        broken = self._broken(declaration)
        if broken:
            out["broken"] = broken
        return out

    def read_document(self, preset_id: str) -> str:
        import yaml

        plugins = self._declaration(preset_id).config.plugins
        return yaml.safe_dump(plugins, sort_keys=False, allow_unicode=True)

    def composed_preset(self, ctx: Context) -> str | None:
        """The preset the agent of ``ctx`` joined, or ``None``."""
        generation = self._joined.get(ctx.scope) if ctx.scope is not None else None
        return generation.preset_id if generation is not None else None

    def service_for(self, agent: Any, key: ServiceKey[T]) -> T | None:
        """The service ``key`` names inside the agent's preset realm (e.g. ``compaction``), or ``None``."""
        generation = self._joined.get(agent)
        if generation is None:
            return None
        root = self.ctx.runtime.root_realm
        for fiber in _subtree(generation.fiber):
            if fiber.ctx is None:
                continue
            realm = fiber.ctx.realm_of(key.name)
            if realm is not root and realm.get(key.name) is not None:
                return cast("T", realm.get(key.name))
        return None

    # -- joining --------------------------------------------------------------------------------

    async def _current(self, preset_id: str | None) -> Generation:
        declaration = self._declaration(preset_id)
        await self.ctx.runtime.loader.settle()
        broken = self._broken(declaration)
        if broken:
            raise RemoteError("agent-preset/invalid", f'agent preset "{declaration.config.id}" is broken: {broken}')
        return declaration.current

    def _bind(self, key: Any, generation: Generation) -> None:
        previous = self._joined.get(key)
        self.ctx.runtime.scopes.bind(key, generation.key)
        self._joined[key] = generation
        generation.members.add(key)
        if previous is not None and previous is not generation:
            previous.members.discard(key)
            if previous.retired and not previous.members:
                self._schedule_unload(previous)

    def _schedule_unload(self, generation: Generation) -> None:
        task = asyncio.get_running_loop().create_task(self._unload(generation))
        self._pending_unloads.add(task)
        task.add_done_callback(self._pending_unloads.discard)

    async def mount(self, agent_ctx: Context, preset_id: str | None = None) -> dict[str, str]:
        """Join an unpublished agent to the current generation of the preset."""
        key = agent_ctx.scope
        if key is None:
            raise RemoteError("agent-preset/scope", "Child preset binding requires a scope")
        if key in self._joined:
            raise RemoteError("agent-preset/joined", "Child already joined a preset")
        generation = await self._current(preset_id)
        self._bind(key, generation)
        return {"id": generation.preset_id}

    def compose_from(self, child_ctx: Context, parent_ctx: Context) -> str | None:
        """Join a child to the exact generation its parent runs; ``None`` when the parent joined none."""
        parent = self._joined.get(parent_ctx.scope) if parent_ctx.scope is not None else None
        if parent is None:
            return None
        if parent.fiber.state == DISPOSED:
            raise RemoteError("agent-preset/unavailable", "Parent preset revision is unavailable")
        key = child_ctx.scope
        if key is None:
            raise RemoteError("agent-preset/scope", "Child preset binding requires a scope")
        if key in self._joined:
            raise RemoteError("agent-preset/joined", "Child already joined a preset")
        self._bind(key, parent)
        return parent.preset_id

    async def recompose(self, agent_ctx: Context, preset_id: str) -> None:
        """Rebind an agent that has not started to another preset, then emit ``tools/change``."""
        key = agent_ctx.scope
        if key is None:
            raise RemoteError("agent-preset/scope", "Child preset binding requires a scope")
        generation = await self._current(preset_id)
        self._bind(key, generation)
        self.ctx.emit(TOOLS_CHANGED)

    async def select(self, agent: Any, preset_id: str) -> None:
        """Switch the preset of a session that has not started a turn (serialised per agent)."""
        lock = self._locks.get(agent)
        if lock is None:
            lock = self._locks[agent] = asyncio.Lock()
        async with lock:
            if any(e["type"] == "turn/start" for e in agent.session.events):
                raise RemoteError("agent-preset/locked", "This session has already started")
            declaration = self._declaration(preset_id)
            if self._joined.get(agent) is declaration.current:
                return
            await self.recompose(agent.ctx, preset_id)
            agent.session.append("agent-preset/selected", {"agentPreset": preset_id})

    def leave(self, agent: Any) -> None:
        """Forget a disposed agent; a retired generation nobody uses any more is unloaded."""
        generation = self._joined.pop(agent, None)
        if generation is None:
            return
        generation.members.discard(agent)
        if generation.retired and not generation.members:
            self._schedule_unload(generation)

    async def dispose(self) -> None:
        for generation in list(self._generations):
            await self._unload(generation)


def preset_setup(ctx: Context) -> Callable[[Context, Any], Awaitable[None]]:
    """The creation ``setup`` of an entry point: join the preset the agent's session names.

    The preset is the session's (:func:`resolve_session_preset`), else the roster default. A
    session naming a preset in a deployment without a roster fails with one clear message.
    """

    async def setup(agent_ctx: Context, agent: Any) -> None:
        wanted = resolve_session_preset(agent.session)
        roster: AgentPresets | None = ctx.get(AGENT_PRESETS)
        if roster is None or not roster.configured:
            if wanted is not None:
                raise RemoteError(
                    "agent-preset/no-roster",
                    f'the deployment composes no agent preset roster, so session "{agent.id}" cannot run preset '
                    f'"{wanted}"',
                )
            return
        await roster.mount(agent_ctx, wanted)

    return setup


def header_preset(ctx: Context, requested: str | None) -> str | None:
    """The ``agentPreset`` a new session's header records: the requested one, else the roster default."""
    if requested is not None:
        return requested
    roster: AgentPresets | None = ctx.get(AGENT_PRESETS)
    return roster.default_id if roster is not None and roster.configured else None


class AgentPresetUnit:
    """``agentPreset``: the preset a session runs (header, then the last ``agent-preset/selected``)."""

    key = "agentPreset"
    state_version = 1

    def state_schema(self, raw: object) -> str | None:
        return None if raw is None else str(raw)

    def init(self, header: dict[str, Any], inherited_event_count: int) -> str | None:
        preset = header.get("agentPreset")
        return None if preset is None else str(preset)

    def apply(self, state: str | None, event: dict[str, Any]) -> str | None:
        if event["type"] == "agent-preset/selected":
            return str(event["data"]["agentPreset"])
        return state

    wire = Wire(
        view=lambda state: {} if state is None else {"agentPreset": state},
        view_schema=lambda view: view,
    )


# -- the invariant companion (spec 10 §5.3) ------------------------------------------------------


def install_invariants(roster: AgentPresets) -> Callable[[Context, Callable[[str], NoReturn]], None]:
    def install(ctx: Context, fail: Callable[[str], NoReturn]) -> None:
        async def assembled_for_joined(payload: PromptAssemble, nxt: Next[PromptAssembly]) -> PromptAssembly:
            agent = payload.get("agent")
            if agent is not None and roster.configured and roster.composed_preset(agent.ctx) is None:
                fail(UNJOINED_FAILURE.format(id=agent.id))
            return await nxt()

        def service_provided(service: str, realm: Realm, fiber: Fiber) -> None:
            message = roster.late_services(service, realm, fiber)
            if message is not None:
                fail(message)

        ctx.on(PROMPT_ASSEMBLE, assembled_for_joined, name="agent-presets", global_=True)
        ctx.on(SERVICE_PROVIDED, service_provided, global_=True)

    return install


# -- plugins -------------------------------------------------------------------------------------

name = "agent-presets"
optional = (INVARIANTS, SESSION_PROJECTIONS)


def apply(ctx: Context, config: Config) -> None:
    """Provide the roster, warn about unjoined agents and install the invariant companion."""
    roster = AgentPresets(ctx, config)
    ctx.provide(AGENT_PRESETS, roster)
    ctx.effect(lambda: roster.dispose)

    def warn_unjoined(payload: AgentCreated) -> None:
        agent = payload["agent"]
        if roster.configured and roster.composed_preset(agent.ctx) is None:
            log.warning(UNJOINED_WARNING.format(id=agent.id))

    ctx.on(AGENT_CREATED, warn_unjoined, global_=True)
    ctx.on(AGENT_DISPOSED, lambda payload: roster.leave(payload["agent"]), global_=True)
    invariants: Invariants | None = ctx.get(INVARIANTS)
    if invariants is not None:
        invariants.register(ctx, "agent-presets", install_invariants(roster))
    projections: SessionProjections | None = ctx.get(SESSION_PROJECTIONS)
    if projections is not None:
        projections.register(ctx, AgentPresetUnit())


class _PresetPlugin:
    """``agent-preset``: one declaration row, registered with the roster while the row is loaded."""

    name = "agent-preset"
    inject = (AGENT_PRESETS,)
    Config = PresetConfig

    async def __call__(self, ctx: Context, config: PresetConfig) -> None:
        roster: AgentPresets = ctx.require(AGENT_PRESETS)
        await roster.declare(ctx, config)


preset_plugin = _PresetPlugin()
