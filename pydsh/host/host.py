"""A loaded composition and the root sessions opened in it: the layer every frontend stands on.

:class:`Host` composes a profile (bundles plus patch layers), loads it in the caller's event loop,
and opens root sessions as :class:`~pydsh.host.agent.Agent` objects — each id once, however many
requests race for it, under one resumability rule. ``pydsh.open_host`` returns one; the command
line's apps get the one their process runs in.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydsh.agent.keys import AGENTS
from pydsh.host.errors import HostError
from pydsh.host.home import lease_home, release_home
from pydsh.host.workspace import check_workspace
from pydsh.kernel.keys import HOST_INFO, AnyKey, HostInfo
from pydsh.llm.keys import LLM_TRANSPORT
from pydsh.mcp_resources.keys import MCP_RESOURCES
from pydsh.session.keys import SESSION_PERSISTENCE, SESSIONS
from pydsh.subagents.keys import SUBAGENTS

if TYPE_CHECKING:
    from types import TracebackType

    import httpx

    from pydsh.agent.registry import AgentHandle, AgentRegistry, Setup
    from pydsh.host.agent import Agent
    from pydsh.kernel.compose import Composition, Row
    from pydsh.kernel.context import Context
    from pydsh.kernel.host import Kernel
    from pydsh.session.log import SessionStore

Patch = str | os.PathLike[str] | list[dict[str, Any]]
"""A patch layer: a YAML file, or its operations as a list (``[{"id": "llm-retry", "disabled": True}]``)."""

DEFAULT_PROFILE = "embed"

log = logging.getLogger("pydsh.host")


@dataclass(frozen=True)
class AgentSpec:
    """What a new or resumed root agent is opened with; ``None`` means the profile's default."""

    cwd: str | None = None
    provider: str | None = None
    model: str | None = None
    reasoning_effort: str | None = None
    max_tokens: int | None = None
    preset: str | None = None
    setup: Callable[[Context, Any], Awaitable[None] | None] | None = field(default=None, compare=False)
    """Runs in the new agent's context after it joined its preset (a frontend's own per-session mounts)."""


class Host:
    """A composed profile running in the caller's event loop; ``async with`` opens and closes it."""

    temporary_home = False
    """Without ``dsh_home``: open in a new temporary home, removed when the last host using it closes."""

    def __init__(
        self,
        profile: str = DEFAULT_PROFILE,
        *,
        patches: Sequence[Patch] = (),
        cwd: str | os.PathLike[str] | None = None,
        dsh_home: str | os.PathLike[str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.profile = profile
        self.patches = list(patches)
        self.cwd = os.path.abspath(cwd if cwd is not None else os.getcwd())
        self.transport = transport
        self._home = dsh_home
        self._rows: list[Row] | None = None
        self._kernel: Kernel | None = None
        self._agents: dict[str, Agent] = {}
        self._opening: dict[str, asyncio.Task[Agent]] = {}
        self._leased = False

    @classmethod
    def of_rows(cls, profile: str, rows: list[Row]) -> Host:
        """A host for rows the command line composed already (its warnings printed, its dump done)."""
        host = cls(profile)
        host._rows = rows
        return host

    # -- the composition ---------------------------------------------------------------------------

    @property
    def ctx(self) -> Context:
        """The root context: every service of the composition (``host.ctx.require(LLM)``)."""
        if self._kernel is None:
            raise HostError("the host is not open", "not_open")
        return self._kernel.ctx

    @property
    def sessions(self) -> SessionStore:
        """The live session logs of the process."""
        return self.ctx.require(SESSIONS)

    @property
    def registry(self) -> AgentRegistry:
        """Every live agent of the process (roots and their descendants)."""
        return self.ctx.require(AGENTS)

    @property
    def idle(self) -> bool:
        """Whether no live agent of the process (root, subagent or teammate) is running a turn."""
        return all(agent.status == "idle" for agent in self.registry.all())

    async def __aenter__(self) -> Host:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self, *, service: AnyKey = AGENTS) -> Host:
        """Compose the profile and load it; ``HostError`` names what is wrong with it (each problem on its
        own line) or that the composition provides no ``service``."""
        if self._kernel is not None:
            raise HostError("the host is already open")
        if self._home is not None or self.temporary_home:
            lease_home(str(Path(self._home).expanduser().resolve()) if self._home is not None else None)
            self._leased = True
        try:
            self._kernel = await self._load(service)
        except BaseException:
            self._release()
            raise
        return self

    async def _load(self, service: AnyKey) -> Kernel:
        from pydsh.kernel.host import Kernel

        rows = self._rows if self._rows is not None else self._resolve()
        kernel = Kernel()
        from pydsh.kernel.profiles import profile_dir

        kernel.ctx.provide(HOST_INFO, HostInfo(profile=self.profile, profile_dir=str(profile_dir(self.profile))))
        if self.transport is not None:
            kernel.ctx.provide(LLM_TRANSPORT, self.transport)
        await kernel.load(rows)
        problems = composition_errors(kernel)
        if problems:
            await kernel.dispose()
            raise HostError("\n".join(problems))
        if kernel.ctx.get(service) is None:
            failed = ", ".join(f.row_id for f in kernel.loader.failures) or "none"
            await kernel.dispose()
            raise HostError(
                f'profile "{self.profile}" provides no {service.name} service (failed rows: {failed})', "unavailable"
            )
        return kernel

    def _resolve(self) -> list[Row]:
        from pydsh.kernel.compose import resolve_rows
        from pydsh.kernel.errors import KernelError
        from pydsh.kernel.profiles import ProfileError

        try:
            return resolve_rows(self._compose().rows)
        except ProfileError as exc:
            raise HostError(str(exc).removeprefix("error: ")) from None
        except KernelError as exc:
            raise HostError(exc.detail) from None

    def _compose(self) -> Composition:
        from pydsh.kernel.compose import read_yaml_file
        from pydsh.kernel.profiles import compose_profile

        comp = compose_profile(self.profile, [])
        for i, patch in enumerate(self.patches, 1):
            if isinstance(patch, list):
                comp.apply_patch(patch, f"patch {i}")
            else:
                path = Path(patch).expanduser()
                comp.apply_patch(read_yaml_file(path.resolve()), str(path))
        comp.check_ids()
        for warning in comp.warnings:
            log.warning("%s", warning)
        return comp

    async def close(self) -> None:
        """Close every agent (logs written out), then unload the composition; safe to call twice."""
        kernel = self._kernel
        if kernel is None:
            return
        try:
            errors = await self.close_agents()
        finally:
            self._kernel = None
            try:
                await kernel.dispose()
            finally:
                self._release()
        if errors:
            raise ExceptionGroup("closing the host's agents failed", errors)

    def _release(self) -> None:
        if self._leased:
            self._leased = False
            release_home()

    # -- agents ------------------------------------------------------------------------------------

    def prompt_commands(self) -> dict[str, str]:
        """The ``/`` commands of the composition's MCP prompts (``/mcp__server__prompt``) and their help, for a
        frontend's command list; a prompt naming one runs it (``mcp-prompt-commands``)."""
        service = self.ctx.get(MCP_RESOURCES)
        return {} if service is None else {f"/{c.name}": c.description for c in service.commands(None)}

    @property
    def agents(self) -> list[Agent]:
        """The agents opened through this host and not closed yet."""
        return list(self._agents.values())

    def agent(self, session_id: str) -> Agent | None:
        """The open agent of ``session_id``, if this host opened it."""
        return self._agents.get(session_id)

    async def opened(self, session_id: str) -> Agent | None:
        """The open agent of ``session_id`` once an opening in flight finished; ``None`` if the host has none."""
        opening = self._opening.get(session_id)
        if opening is not None:
            await asyncio.wait([opening])
        return self._agents.get(session_id)

    async def openings(self) -> None:
        """Wait for every opening in flight (a teardown closes what they open, too)."""
        if self._opening:
            await asyncio.wait(list(self._opening.values()))

    async def create_agent(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        reasoning_effort: str | None = None,
        max_tokens: int | None = None,
        preset: str | None = None,
    ) -> Agent:
        """A new agent and session in ``cwd`` (default: the host's); the route defaults to the profile's.

        ``preset`` names the agent preset to join (profiles with a preset roster; default: the roster's).
        """
        workspace = os.fspath(cwd) if cwd is not None else self.cwd
        spec = AgentSpec(workspace, provider, model, reasoning_effort, max_tokens, preset)
        try:
            return await self.create(spec, session_id)
        except HostError as exc:
            if exc.code != "exists":
                raise
            raise HostError(f"{exc}; continue it with resume_agent", "exists") from None

    async def resume_agent(
        self,
        session_id: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        reasoning_effort: str | None = None,
        max_tokens: int | None = None,
    ) -> Agent:
        """The agent of a persisted root session, continuing its log (same session id)."""
        return await self.resume(session_id, AgentSpec(None, provider, model, reasoning_effort, max_tokens))

    async def create(self, spec: AgentSpec, session_id: str | None = None) -> Agent:
        """A new root session from ``spec``; ``HostError`` for a bad workspace or id, or an id in use."""
        from pydsh.session.ids import session_id_problem

        workspace = check_workspace(spec.cwd or self.cwd)
        if session_id is None:
            return await self._open(lambda: self._create(spec, workspace, None))
        problem = session_id_problem(session_id)
        if problem is not None:
            raise HostError(f"session id {problem}", "bad_session_id")
        self._refuse_open(session_id)
        return await self._single_flight(session_id, lambda: self._create(spec, workspace, session_id))

    async def resume(self, session_id: str, spec: AgentSpec | None = None) -> Agent:
        """The persisted root session ``session_id``, cold-resumed (its stored workspace kept)."""
        self._refuse_open(session_id)
        return await self._single_flight(session_id, lambda: self._resume(session_id, spec or AgentSpec()))

    async def open_agent(self, session_id: str, create: AgentSpec | None = None) -> Agent:
        """``session_id``'s agent, opened once however many ask at once: the open one, else a persisted
        session resumed — or, with ``create``, a new session of that id (a persisted one is then refused:
        it must be resumed explicitly)."""
        agent = self._agents.get(session_id)
        if agent is not None:
            return agent
        opening = self._opening.get(session_id)
        if opening is not None:
            return await asyncio.shield(opening)
        if create is None:
            return await self.resume(session_id)
        return await self.create(create, session_id)

    def _refuse_open(self, session_id: str) -> None:
        if session_id in self._agents or session_id in self._opening:
            raise HostError(f'session "{session_id}" is already open or opening', "already_open")
        if self.sessions.get(session_id) is not None:
            raise HostError(f'session "{session_id}" is already live in this process', "already_open")

    async def _single_flight(self, session_id: str, opener: Callable[[], Awaitable[AgentHandle]]) -> Agent:
        task = asyncio.ensure_future(self._open(opener))
        self._opening[session_id] = task
        task.add_done_callback(lambda done: self._opened(session_id, done))
        return await asyncio.shield(task)

    def _opened(self, session_id: str, task: asyncio.Task[Agent]) -> None:
        """Forget a finished opening; its failure was raised to whoever waited for it."""
        if self._opening.get(session_id) is task:
            del self._opening[session_id]
        if not task.cancelled():
            task.exception()

    async def _open(self, opener: Callable[[], Awaitable[AgentHandle]]) -> Agent:
        from pydsh.host.agent import Agent

        handle = await opener()
        agent = Agent(self, handle)
        self._agents[agent.session_id] = agent
        return agent

    async def _create(self, spec: AgentSpec, workspace: str, session_id: str | None) -> AgentHandle:
        from pydsh.agent.presets import RemoteError, header_preset
        from pydsh.agent.registry import CreateAgentOptions
        from pydsh.contract.agent import AgentOptions

        if session_id is not None and await self._stored(session_id):
            raise HostError(f'session "{session_id}" already exists', "exists")
        options = AgentOptions(spec.provider, spec.model, spec.max_tokens, spec.reasoning_effort)
        create = CreateAgentOptions(
            session_id=session_id,
            cwd=workspace,
            agent_options=options,
            agent_preset=header_preset(self.ctx, spec.preset),
            setup=self._setup(spec),
        )
        try:
            return await self.registry.create(create)
        except RemoteError as exc:
            raise HostError(str(exc), "unknown_preset") from exc

    async def _resume(self, session_id: str, spec: AgentSpec) -> AgentHandle:
        from pydsh.agent.presets import RemoteError
        from pydsh.contract.agent import AgentOptions

        header = await self.stored_header(session_id)
        refusal = resume_refusal(header)
        if refusal is not None:
            raise refusal
        options = AgentOptions(spec.provider, spec.model, spec.max_tokens, spec.reasoning_effort)
        try:
            return await self.registry.resume(session_id, agent_options=options, setup=self._setup(spec))
        except RemoteError as exc:
            raise HostError(str(exc), "unknown_preset") from exc
        except Exception as exc:
            refusal = _session_refusal(session_id, exc)
            if refusal is None:
                raise
            raise refusal from None

    def _setup(self, spec: AgentSpec) -> Setup:
        """The creation setup: join the session's preset, then the frontend's own ``spec.setup``."""
        from pydsh.agent.presets import preset_setup

        join = preset_setup(self.ctx)
        extra = spec.setup
        if extra is None:
            return join

        async def setup(agent_ctx: Context, agent: Any) -> None:
            await join(agent_ctx, agent)
            done = extra(agent_ctx, agent)
            if done is not None:
                await done

        return setup

    async def _stored(self, session_id: str) -> bool:
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        return persistence is not None and bool(await persistence.exists(session_id))

    async def stored_header(self, session_id: str) -> dict[str, Any]:
        """The header of a persisted session; ``HostError`` when there is none or it cannot be read."""
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        if persistence is None:
            raise HostError(f'session "{session_id}" not found', "not_found")
        try:
            header: dict[str, Any] = (await persistence.stat(session_id))["header"]
        except Exception as exc:
            refusal = _session_refusal(session_id, exc)
            if refusal is None:
                raise
            raise refusal from None
        return header

    async def close_agents(self, unfinished: set[str] | None = None) -> list[Exception]:
        """Close every agent this host opened (all their descendants first); the failures.

        ``unfinished`` holds what is still closing at each moment (``subagent drain``, ``session <id>``),
        for a caller that bounds the time it waits.
        """
        agents = self.agents
        progress = unfinished if unfinished is not None else set()
        subagents = self.ctx.get(SUBAGENTS) if self._kernel is not None else None
        errors: list[Exception] = []
        if subagents is not None and agents:
            progress.add("subagent drain")
            try:
                await subagents.drain([a.session_id for a in agents])
            except Exception as exc:
                errors.append(exc)
            progress.discard("subagent drain")

        async def close(agent: Agent) -> None:
            label = f"session {agent.session_id}"
            progress.add(label)
            try:
                await agent.close()
            finally:
                progress.discard(label)

        results = await asyncio.gather(*(close(agent) for agent in agents), return_exceptions=True)
        errors += [r for r in results if isinstance(r, Exception)]
        return errors

    def _forget(self, agent: Agent) -> None:
        if self._agents.get(agent.session_id) is agent:
            del self._agents[agent.session_id]


def resume_refusal(header: dict[str, Any]) -> HostError | None:
    """Why a stored session cannot be opened as a root agent: a member (subagent, fork or teammate) is
    resumed by its own parent, and a workspace that is gone would leave every tool failing."""
    session_id = header.get("id")
    if header.get("origin") == "subagent" or header.get("parentSession") is not None:
        return HostError(
            f'session "{session_id}" is a member of session "{header.get("parentSession")}"; '
            "its parent agent resumes it",
            "member_session",
        )
    cwd = header.get("cwd")
    if isinstance(cwd, str):
        try:
            check_workspace(cwd)
        except HostError as exc:
            return HostError(f'session "{session_id}" cannot be resumed: {exc}', "bad_workspace")
    return None


def _session_refusal(session_id: str, exc: Exception) -> HostError | None:
    """A persistence failure as the host's error, its message kept (the SDK answers with it verbatim);
    ``None`` for anything else."""
    from pydsh.session.errors import SessionAlreadyOwnedError, SessionError, SessionPersistenceNotFoundError

    if isinstance(exc, SessionPersistenceNotFoundError):
        return HostError(f'session "{session_id}" not found', "not_found")
    if isinstance(exc, SessionAlreadyOwnedError):
        return HostError(str(exc), "owned_elsewhere")
    if isinstance(exc, SessionError):
        return HostError(str(exc), "unavailable")
    if isinstance(exc, ValueError):
        return HostError(str(exc), "already_open")
    return None


def composition_errors(kernel: Kernel) -> list[str]:
    """Composition errors, each once: invalid config of rows from shipped bundles or the user's patches,
    and listeners whose declared order contradicts another's (from any row)."""
    from pydsh.kernel.profiles import PLUGIN_BUNDLE

    def fatal(code: object, source: str) -> bool:
        return code == "EVENT_ORDER" or (code == "CONFIG_INVALID" and not source.startswith(PLUGIN_BUNDLE))

    errors = (str(f.error) for f in kernel.loader.failures if fatal(getattr(f.error, "code", None), f.source))
    return list(dict.fromkeys(errors))


def open_host(
    profile: str = DEFAULT_PROFILE,
    *,
    patches: Sequence[Patch] = (),
    cwd: str | os.PathLike[str] | None = None,
    dsh_home: str | os.PathLike[str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Host:
    """A host for ``profile`` with ``patches`` applied after its own layers; open it with ``async with``.

    ``cwd`` is the default workspace of new agents, ``dsh_home`` overrides ``$DSH_HOME`` while the
    host is open, and ``transport`` (an ``httpx.AsyncBaseTransport``) carries every model request.
    """
    return Host(profile, patches=patches, cwd=cwd, dsh_home=dsh_home, transport=transport)
