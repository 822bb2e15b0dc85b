"""The public embedding API: open a host from a profile, drive agents, stream their events.

A :class:`Host` is one loaded composition (the profile's bundles plus patch layers) inside the
caller's event loop; :class:`Agent` wraps one live agent of the ``agents`` service. Events are the
session log's own events (typed views over the v4 envelope) plus live text and reasoning deltas
of the assistant stream; nothing here runs a loop of its own. Re-exported by ``pydsh``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from types import TracebackType

    import httpx

    from pydsh.agent.agent import Agent as LiveAgent
    from pydsh.agent.registry import AgentHandle
    from pydsh.kernel.compose import Composition
    from pydsh.kernel.context import Context
    from pydsh.kernel.host import Kernel
    from pydsh.session.persistence.base import SessionPersistence

Event = dict[str, Any]
Input = str | list[dict[str, Any]]
"""A prompt: text, or content blocks (``{"type": "text", "text": ...}``) sent as they are."""
Patch = str | os.PathLike[str] | list[dict[str, Any]]
"""A patch layer: a YAML file, or its operations as a list (``[{"id": "llm-retry", "disabled": True}]``)."""

DEFAULT_PROFILE = "embed"

log = logging.getLogger("pydsh.embed")


class HostError(Exception):
    """A host cannot be opened or asked: bad profile, patch or composition, unknown session."""


# -- events ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text as it streams (live only; the logged ``AssistantMessage`` follows)."""

    text: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of assistant reasoning as it streams (live only)."""

    text: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One event of the agent's session log; ``event`` is the v4 envelope (type, seq, time, data)."""

    event: Event

    @property
    def type(self) -> str:
        return str(self.event["type"])

    @property
    def seq(self) -> int:
        return int(self.event["seq"])


@dataclass(frozen=True, slots=True)
class AssistantMessage(SessionEvent):
    """A committed assistant message (text, reasoning and tool-call blocks)."""

    @property
    def text(self) -> str:
        return _text(self.event["data"]["message"])

    @property
    def usage(self) -> dict[str, int]:
        return dict(self.event["data"].get("usage") or {})


@dataclass(frozen=True, slots=True)
class ToolCall(SessionEvent):
    """A tool call the model made; ``arguments`` is the JSON text it sent."""

    @property
    def call_id(self) -> str:
        return str(self.event["data"]["callId"])

    @property
    def name(self) -> str:
        return str(self.event["data"]["name"])

    @property
    def arguments(self) -> str:
        return str(self.event["data"]["arguments"])


@dataclass(frozen=True, slots=True)
class ToolResult(SessionEvent):
    """The result of a tool call, as the model will see it."""

    @property
    def call_id(self) -> str:
        return str(self.event["data"]["message"]["toolCallId"])

    @property
    def text(self) -> str:
        return _text(self.event["data"]["message"])

    @property
    def is_error(self) -> bool:
        return bool(self.event["data"]["message"].get("isError"))


@dataclass(frozen=True, slots=True)
class TurnEnd(SessionEvent):
    """The end of a turn: ``finish_reason`` is ``completed``, ``error``, ``aborted``, ``max-tokens``, …"""

    @property
    def finish_reason(self) -> str:
        return str(self.event["data"]["reason"]["kind"])

    @property
    def error(self) -> dict[str, Any] | None:
        """The failure (``message``, ``code``) of an ``error`` turn."""
        error = self.event["data"]["reason"].get("error")
        return dict(error) if error is not None else None


AgentEvent = TextDelta | ReasoningDelta | SessionEvent
"""What :meth:`Agent.prompt` yields; log events are ``SessionEvent`` or one of its subclasses."""

_TYPED: dict[str, type[SessionEvent]] = {
    "assistant/message": AssistantMessage,
    "tool/call": ToolCall,
    "tool/result": ToolResult,
    "turn/end": TurnEnd,
}
_DELTAS: dict[str, type[TextDelta | ReasoningDelta]] = {"text-delta": TextDelta, "reasoning-delta": ReasoningDelta}


def _text(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message.get("content", ()) if b.get("type") == "text")


def session_event(event: Event) -> SessionEvent:
    """The typed view of one log event."""
    return _TYPED.get(event["type"], SessionEvent)(event)


@dataclass(frozen=True)
class RunResult:
    """What one prompt produced, once the agent is idle again (names as in ``pydsh.sdk.client``)."""

    session_id: str
    final_response: str
    finish_reason: str | None
    usage: dict[str, int]
    error: dict[str, Any] | None
    events: list[Event] = field(repr=False)


# -- runs ------------------------------------------------------------------------------------


class Run:
    """One prompt as an async iterator of its events; ``result`` is set after the last one.

    Use it as ``async with agent.prompt(...) as run:`` when you may stop iterating early: leaving
    the block stops collecting (the turn goes on; ``Agent.cancel`` stops it).
    """

    def __init__(self, agent: Agent, input: Input) -> None:
        self.agent = agent
        self.input = input
        self.result: RunResult | None = None
        self._events: AsyncGenerator[AgentEvent, None] | None = None

    def __aiter__(self) -> Run:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._events is None:
            self._events = self._stream()
        return await anext(self._events)

    async def __aenter__(self) -> Run:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop collecting (listeners removed at once)."""
        if self._events is not None:
            await self._events.aclose()

    async def _stream(self) -> AsyncGenerator[AgentEvent, None]:
        from pydsh.agent.agent import user_message

        live = self.agent.live
        message = user_message(self.input)
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        logged: list[Event] = []

        def on_event(session: Any, event: Event) -> None:
            if session is not live.session:
                return
            if not logged and not _is_receipt(event, message["id"]):
                return
            logged.append(event)
            queue.put_nowait(session_event(event))

        def on_stream(payload: dict[str, Any]) -> None:
            frame = payload["frame"]
            if payload["agent"] is live and logged and frame["type"] == "chunk":
                kind = _DELTAS.get(frame["chunk"]["type"])
                if kind is not None:
                    queue.put_nowait(kind(frame["chunk"]["text"], frame["turn"], frame["step"]))

        ctx = self.agent.host.ctx
        removers = [ctx.on("session/event", on_event), ctx.on("agent/assistant-stream", on_stream)]
        idle: asyncio.Future[None] | None = None
        try:
            live.followup(message)
            idle = asyncio.ensure_future(live.when_idle())
            idle.add_done_callback(lambda _done: queue.put_nowait(None))
            while (item := await queue.get()) is not None:
                yield item
            await idle
        finally:
            for remove in removers:
                remove()
            if idle is not None and not idle.done():
                idle.cancel()
        self.result = _result(live.id, logged)


def _is_receipt(event: Event, message_id: str) -> bool:
    """The splice that queued ``message_id`` (where a run starts collecting)."""
    if event["type"] != "agent/inbox/spliced":
        return False
    return any(m.get("id") == message_id for m in event["data"].get("inserted", ()))


def _result(session_id: str, events: list[Event]) -> RunResult:
    """The run's result, read the way the SDK client reads a run (``pydsh.sdk.client``)."""
    from pydsh.sdk.client import final_response, finish_reason

    usage: dict[str, int] = {}
    error = None
    for event in events:
        if event["type"] == "assistant/message":
            for key, value in (event["data"].get("usage") or {}).items():
                usage[key] = usage.get(key, 0) + value
        elif event["type"] == "turn/end":
            error = event["data"]["reason"].get("error")
    return RunResult(
        session_id=session_id,
        final_response=final_response(events),
        finish_reason=finish_reason(events),
        usage=usage,
        error=dict(error) if error is not None else None,
        events=events,
    )


# -- agents ----------------------------------------------------------------------------------


class Agent:
    """One live agent of a host: prompt it, steer or cancel it, close it (its log stays on disk)."""

    def __init__(self, host: Host, handle: AgentHandle) -> None:
        self.host = host
        self._handle = handle
        self._closed = False

    @property
    def live(self) -> LiveAgent:
        """The agent of the ``agents`` service behind this wrapper (the loop's own object)."""
        return self._handle.agent

    @property
    def session_id(self) -> str:
        return self.live.id

    @property
    def status(self) -> Literal["idle", "running"]:
        return self.live.status

    @property
    def events(self) -> list[Event]:
        """Every event of the session log so far (read-only envelopes)."""
        return list(self.live.session.events)

    def prompt(self, input: Input) -> Run:
        """``input`` as the next turn: iterating the run sends it and yields its events until the
        agent is idle again."""
        self._check_open()
        return Run(self, input)

    async def run(self, input: Input) -> RunResult:
        """Prompt and wait: the final text, finish reason, usage and events of the run."""
        async with self.prompt(input) as run:
            async for _event in run:
                pass
        assert run.result is not None
        return run.result

    def steer(self, input: Input) -> None:
        """Queue ``input`` for the next step of the running turn."""
        from pydsh.agent.agent import user_message

        self._check_open()
        self.live.steer(user_message(input))

    def cancel(self) -> None:
        """Interrupt the running turn (it ends ``aborted``) and drop queued input."""
        self.live.cancel({"kind": "user"})

    async def close(self) -> None:
        """Interrupt a running turn (queued input kept), write the log out and release the agent.

        ``host.resume_agent(session_id)`` continues it later.
        """
        if self._closed:
            return
        self._closed = True
        self.host._forget(self)
        await self._handle.dispose()

    def _check_open(self) -> None:
        if self._closed:
            raise HostError(f'agent "{self.session_id}" is closed')


# -- host ------------------------------------------------------------------------------------


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
        self._kernel: Kernel | None = None
        self._agents: list[Agent] = []
        self._leased = False

    @property
    def ctx(self) -> Context:
        """The root context: every service of the composition (``host.ctx.require("llm")``)."""
        if self._kernel is None:
            raise HostError("the host is not open")
        return self._kernel.ctx

    async def __aenter__(self) -> Host:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> Host:
        """Compose the profile and load it; ``HostError`` names what is wrong with it."""
        if self._kernel is not None:
            raise HostError("the host is already open")
        if self._home is not None or self.temporary_home:
            _take_home(str(Path(self._home).expanduser().resolve()) if self._home is not None else None)
            self._leased = True
        try:
            self._kernel = await self._load()
        except BaseException:
            if self._leased:
                self._leased = False
                _release_home()
            raise
        return self

    async def _load(self) -> Kernel:
        from pydsh.apps.host import boot, strict_config_errors
        from pydsh.kernel.compose import resolve_rows
        from pydsh.kernel.errors import KernelError
        from pydsh.kernel.profiles import ProfileError
        from pydsh.llm.http import TRANSPORT_SERVICE

        try:
            rows = resolve_rows(self._compose().rows)
        except ProfileError as exc:
            raise HostError(str(exc).removeprefix("error: ")) from None
        except KernelError as exc:
            raise HostError(exc.detail) from None
        services = {TRANSPORT_SERVICE: self.transport} if self.transport is not None else {}
        kernel = await boot(rows, self.profile, services)
        problems = strict_config_errors(kernel)
        if kernel.ctx.get("agents") is None:
            failed = ", ".join(f.row_id for f in kernel.loader.failures) or "none"
            problems.append(f'profile "{self.profile}" provides no agents service (failed rows: {failed})')
        if problems:
            await kernel.dispose()
            raise HostError("; ".join(problems))
        return kernel

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
        from pydsh.agent.agent import AgentOptions
        from pydsh.agent.presets import RemoteError, header_preset, preset_setup
        from pydsh.agent.registry import CreateAgentOptions
        from pydsh.kernel import services
        from pydsh.session.ids import session_id_problem

        workspace = os.path.abspath(cwd) if cwd is not None else self.cwd
        if not os.path.isdir(workspace):
            raise HostError(f'cwd "{workspace}" is not an existing directory')
        problem = session_id_problem(session_id) if session_id is not None else None
        if problem is not None:
            raise HostError(f"session id {problem}")
        if session_id is not None and await self._session_exists(session_id):
            raise HostError(f'session "{session_id}" already exists; continue it with resume_agent')
        options = AgentOptions(provider=provider, model=model, max_tokens=max_tokens, reasoning_effort=reasoning_effort)
        try:
            handle = await services.agents(self.ctx).create(
                CreateAgentOptions(
                    session_id=session_id,
                    cwd=workspace,
                    agent_options=options,
                    agent_preset=header_preset(self.ctx, preset),
                    setup=preset_setup(self.ctx),
                )
            )
        except RemoteError as exc:
            raise HostError(str(exc)) from exc
        return self._track(handle)

    async def resume_agent(
        self,
        session_id: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        reasoning_effort: str | None = None,
        max_tokens: int | None = None,
    ) -> Agent:
        """The agent of a persisted session, continuing its log (same session id)."""
        from pydsh.agent.agent import AgentOptions
        from pydsh.agent.presets import preset_setup
        from pydsh.kernel import services
        from pydsh.session.errors import SessionPersistenceNotFoundError

        options = AgentOptions(provider=provider, model=model, max_tokens=max_tokens, reasoning_effort=reasoning_effort)
        try:
            handle = await services.agents(self.ctx).resume(
                session_id, agent_options=options, setup=preset_setup(self.ctx)
            )
        except SessionPersistenceNotFoundError:
            raise HostError(f'session "{session_id}" not found') from None
        return self._track(handle)

    async def _session_exists(self, session_id: str) -> bool:
        from pydsh.kernel import services

        persistence: SessionPersistence | None = self.ctx.get("session_persistence")
        live = services.sessions(self.ctx).get(session_id) is not None
        return live or (persistence is not None and await persistence.exists(session_id))

    def _track(self, handle: AgentHandle) -> Agent:
        agent = Agent(self, handle)
        self._agents.append(agent)
        return agent

    def _forget(self, agent: Agent) -> None:
        if agent in self._agents:
            self._agents.remove(agent)

    @property
    def agents(self) -> list[Agent]:
        """The agents opened through this host and not closed yet."""
        return list(self._agents)

    async def close(self) -> None:
        """Close every agent (logs written out), then unload the composition; safe to call twice."""
        kernel = self._kernel
        if kernel is None:
            return
        try:
            results = await asyncio.gather(*(agent.close() for agent in self.agents), return_exceptions=True)
        finally:
            self._kernel = None
            try:
                await kernel.dispose()
            finally:
                if self._leased:
                    self._leased = False
                    _release_home()
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            raise ExceptionGroup("closing the host's agents failed", errors)


@dataclass
class _Home:
    """The ``DSH_HOME`` hosts chose: pydsh reads its home from the process environment, so hosts
    open at the same time share one; the previous value returns when the last of them closes."""

    path: str | None = None
    users: int = 0
    saved: str | None = None
    temporary: tempfile.TemporaryDirectory[str] | None = None


_HOME = _Home()


def _take_home(path: str | None) -> None:
    """Use ``path`` as ``DSH_HOME`` (``None``: the one already chosen, else a new temporary one)."""
    if _HOME.users:
        if path is not None and path != _HOME.path:
            raise HostError(f'another open host uses DSH_HOME "{_HOME.path}"; hosts open at once share one home')
    else:
        if path is None:
            _HOME.temporary = tempfile.TemporaryDirectory(prefix="pydsh-home-")
            path = _HOME.temporary.name
        _HOME.path, _HOME.saved = path, os.environ.get("DSH_HOME")
        os.environ["DSH_HOME"] = path
    _HOME.users += 1


def _release_home() -> None:
    _HOME.users -= 1
    if _HOME.users:
        return
    if _HOME.saved is None:
        os.environ.pop("DSH_HOME", None)
    else:
        os.environ["DSH_HOME"] = _HOME.saved
    temporary = _HOME.temporary
    _HOME.path = _HOME.saved = _HOME.temporary = None
    if temporary is not None:
        temporary.cleanup()


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
