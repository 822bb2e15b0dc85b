"""The ``sdk-server`` plugin: newline-delimited JSON-RPC 2.0 on stdio for SDK clients (spec 06).

The plugin takes fd 1 for frames (``sys.stdout`` and fd 1 itself then point at stderr), reads
stdin from the moment its row activates, and provides the ``app`` service whose ``run`` serves
requests once the composition has settled. Every session event, status change and subagent
edge of the process is forwarded as a notification through one writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydsh import __version__
from pydsh.agent.agent import Agent, AgentOptions, user_message
from pydsh.agent.presets import header_preset, preset_setup
from pydsh.agent.registry import AgentHandle, AgentRegistry, CreateAgentOptions
from pydsh.kernel import services
from pydsh.kernel.config import BaseModel, ConfigDict, field_validator
from pydsh.kernel.context import Context
from pydsh.kernel.events import define_event
from pydsh.kernel.fiber import Disposer, Fiber
from pydsh.sdk.protocol import (
    DELTA_NOTIFICATION,
    INTERNAL_ERROR,
    SERVER_INFO,
    TEAM_NOTIFICATION,
    InitializeParams,
    LineSplitter,
    PromptParams,
    ResumeParams,
    SetWorkingDirectoryParams,
    WaitParams,
    WireError,
    WorkingDirectoryParams,
    decode_line,
    echo_id,
    encode_frame,
    is_request_id,
)
from pydsh.session.events import Event
from pydsh.session.ids import session_id_problem
from pydsh.session.log import Session, SessionStore
from pydsh.session.persistence.base import SessionPersistence
from pydsh.teams.errors import TeamError
from pydsh.teams.service import ROUTES_CHANGED

log = logging.getLogger("pydsh.sdk")

define_event("session/event", "emit")
define_event("session/created", "serial")
define_event("agent/status", "emit")
define_event("agent/error", "emit")
define_event("agent/assistant-stream", "emit")
define_event("subagent/end", "emit")
define_event("llm/stream", "waterfall")

HELP = """\
Usage: pydsh --profile sdk [options]

Serve DeepSeek Harness SDK clients over stdio JSON-RPC.

Options:
  -h, --help  show this help

Example:
  pydsh --profile sdk     serve one SDK runtime until its client disconnects
"""

TEARDOWN_BOUND_S = 5.0
READ_CHUNK = 1 << 16
READ_AHEAD_CHUNKS = 16
OUTBOUND_HIGH_WATER = 1 << 20
OUTBOUND_LOW_WATER = 1 << 18
DELTA_KINDS = {"text-delta": ("text", "text"), "reasoning-delta": ("reasoning", "text")}
DELTA_KINDS["tool-call-delta"] = ("tool-call", "argumentsDelta")


class Config(BaseModel):
    """``sdk-server`` row config (spec 06 §11)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    maxTokensAsSuccess: bool = False

    @field_validator("maxTokensAsSuccess", mode="before")
    @classmethod
    def _strict_bool(cls, value: object) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError(f"must be true or false, not {value!r}")


# -- stdio -----------------------------------------------------------------------------------


class _PipeProtocol(asyncio.Protocol):
    """Write-side protocol of the frame pipe: tracks the buffer draining and the reader going away."""

    def __init__(self, on_lost: Callable[[], None]) -> None:
        self.drained = asyncio.Event()
        self.drained.set()
        self._on_lost = on_lost

    def pause_writing(self) -> None:
        self.drained.clear()

    def resume_writing(self) -> None:
        self.drained.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.drained.set()
        self._on_lost()


class FrameWriter:
    """The single writer of fd 1: one write per frame, in call order; sealed after the last frame."""

    def __init__(self, fd: int, on_lost: Callable[[], None]) -> None:
        self._file = os.fdopen(fd, "wb", buffering=0)
        self._on_lost = on_lost
        self._transport: asyncio.WriteTransport | None = None
        self._protocol: _PipeProtocol | None = None
        self.sealed = False
        self.broken = False
        self._closed = False

    async def open(self) -> None:
        """Drive a pipe or socket through the event loop; a regular file takes blocking writes."""
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.connect_write_pipe(lambda: _PipeProtocol(self._lost), self._file)
        except ValueError:
            return
        transport.set_write_buffer_limits(high=OUTBOUND_HIGH_WATER, low=OUTBOUND_LOW_WATER)
        self._transport, self._protocol = transport, protocol

    def _lost(self) -> None:
        if not (self.broken or self._closed):
            self.broken = True
            self._on_lost()

    def write(self, data: bytes) -> None:
        if self.sealed or self.broken:
            return
        if self._transport is not None:
            if self._transport.is_closing():
                self._lost()
                return
            self._transport.write(data)
            return
        view = memoryview(data)
        try:
            while view:
                view = view[self._file.write(view) or 0 :]
        except OSError:
            self._lost()

    def send(self, frame: dict[str, Any]) -> None:
        """Encode and write one frame (``ValueError`` for a value JSON cannot carry)."""
        if not (self.sealed or self.broken):
            self.write(encode_frame(frame))

    def seal(self) -> None:
        """Nothing is written after this (the ``shutdown`` response was the last frame)."""
        self.sealed = True

    async def writable(self) -> None:
        """Wait while more than the high-water mark of frames is unread by the client (back-pressure)."""
        if self._protocol is not None and not (self.sealed or self.broken):
            await self._protocol.drained.wait()

    async def flush(self) -> None:
        """Wait until every written byte has left the process."""
        if self._transport is not None and self._protocol is not None and not self.broken:
            self._transport.set_write_buffer_limits(high=0)
            await self._protocol.drained.wait()

    def close(self) -> None:
        """Release the frame descriptor (the pipe transport closes it once its buffer is written)."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()
        else:
            self._file.close()


class StdioChannel:
    """The process's stdio taken over for the protocol: frames out on the old fd 1, bytes in from fd 0."""

    def __init__(self, on_output_lost: Callable[[], None]) -> None:
        self._inbound: asyncio.Queue[bytes] = asyncio.Queue()
        self._slots = threading.Semaphore(READ_AHEAD_CHUNKS)
        self._saved_stdout = sys.stdout
        frame_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout.flush()
        sys.stdout = sys.stderr
        self.writer = FrameWriter(frame_fd, on_output_lost)
        loop = asyncio.get_running_loop()
        reader_args = (loop, self._inbound, self._slots)
        threading.Thread(target=_read_stdin, args=reader_args, name="pydsh-sdk-stdin", daemon=True).start()

    async def read(self) -> bytes:
        """The next chunk of stdin (``b""`` at end of input); the reader stays at most a few chunks ahead."""
        chunk = await self._inbound.get()
        self._slots.release()
        return chunk

    def close(self) -> None:
        """Stop writing frames and give ``sys.stdout`` back (fd 1 keeps pointing at stderr)."""
        self.writer.close()
        sys.stdout = self._saved_stdout


def _read_stdin(loop: asyncio.AbstractEventLoop, inbound: asyncio.Queue[bytes], slots: threading.Semaphore) -> None:
    """Blocking reads of fd 0 handed to the loop, each after a free read-ahead slot; ``b""`` marks end of input."""
    while True:
        slots.acquire()
        try:
            chunk = os.read(0, READ_CHUNK)
        except OSError:
            chunk = b""
        try:
            loop.call_soon_threadsafe(inbound.put_nowait, chunk)
        except RuntimeError:
            return
        if not chunk:
            return


class AdmissionLocks:
    """Per-session FIFO locks (prompts are admitted in arrival order) that exist only while requests
    hold or await them, so a long-lived server keeps none for idle sessions."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold ``key``'s lock, after every earlier holder of it."""
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


# -- server ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Defaults:
    """What ``initialize`` committed for sessions opened afterwards."""

    cwd: str
    options: AgentOptions


@dataclass
class OpenSession:
    """A session this server opened (created, resumed, or created by a working-directory request)."""

    handle: AgentHandle
    failure: tuple[int, str] | None = None

    @property
    def agent(self) -> Agent:
        return self.handle.agent


@dataclass
class Teardown:
    """Outcome of the bounded teardown: failure messages, or the items still unfinished at the bound."""

    errors: list[str] = field(default_factory=list)
    overran: bool = False

    @property
    def completed(self) -> bool:
        return not self.errors and not self.overran


def error_message(exc: BaseException) -> str:
    """The ``-32603`` message of a failure: its text, else its class name."""
    return str(exc) or type(exc).__name__


Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class SdkServer:
    """The ``app`` service of the SDK profiles: one JSON-RPC peer on stdio."""

    def __init__(self, ctx: Context, config: Config, channel: StdioChannel) -> None:
        self.ctx = ctx
        self.config = config
        self.channel = channel
        self.out = channel.writer
        self._defaults: Defaults | None = None
        self._deltas = False
        self._team = False
        self._sessions: dict[str, OpenSession] = {}
        self._opening: dict[str, asyncio.Task[OpenSession]] = {}
        self._admission = AdmissionLocks()
        self._announced: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._pending: set[str] = set()
        self._shutting_down = False
        self._teardown: asyncio.Task[Teardown] | None = None
        self._adapter_fiber: Fiber | None = None
        self._signals = 0
        self._ready = asyncio.Event()
        self._exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._handlers: dict[str, Handler] = {
            "initialize": self._initialize,
            "session/prompt": self._prompt,
            "session/resume": self._resume,
            "session/wait": self._wait,
            "session/working-directory/get": self._get_cwd,
            "session/working-directory/set": self._set_cwd,
        }
        self._listeners: list[Disposer] = [
            ctx.on("session/event", self._on_session_event),
            ctx.on("session/created", self._on_session_created),
            ctx.on("agent/status", self._on_status),
            ctx.on("agent/error", self._on_error),
            ctx.on("agent/assistant-stream", self._on_stream),
            ctx.on("subagent/end", self._on_subagent_end),
            ctx.on(ROUTES_CHANGED, self._send_team),
            ctx.on("llm/stream", self._pace_stream, prepend=True),
        ]

    @property
    def agents(self) -> AgentRegistry:
        return services.agents(self.ctx)

    @property
    def sessions(self) -> SessionStore:
        return services.sessions(self.ctx)

    # -- app ----------------------------------------------------------------------------------

    async def run(self, args: list[str]) -> int:
        """Serve until ``shutdown``, end of input, a broken stdout or a signal; returns the exit code."""
        if "-h" in args or "--help" in args:
            self.out.write(HELP.encode())
            await self.out.flush()
            return 0
        if args:
            print("error: too many arguments", file=sys.stderr)
            return 1
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal)
        self._ready.set()
        try:
            return await self._exit
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)

    async def pump(self) -> None:
        """Read stdin from activation on; requests are served once the app runs (start-up has settled)."""
        splitter = LineSplitter(_warn_long_line)
        await self._ready.wait()
        while True:
            await self.out.writable()
            chunk = await self.channel.read()
            if not chunk:
                for line in splitter.finish():
                    self._receive(line)
                self.on_input_closed()
                return
            for line in splitter.feed(chunk):
                self._receive(line)

    def _receive(self, line: bytes) -> None:
        message = decode_line(line)
        if not isinstance(message, dict):
            return
        rid, method = message.get("id"), message.get("method")
        if not is_request_id(rid) or not isinstance(method, str):
            return
        answer_id = echo_id(rid)
        if answer_id is None:
            print(f"pydsh: sdk: ignored a request whose id JSON cannot carry back: {rid!r}", file=sys.stderr)
            return
        params = message.get("params")
        self._spawn(self._serve(answer_id, method, params if isinstance(params, dict) else {}))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, rid: str | float, method: str, params: dict[str, Any]) -> None:
        if method == "shutdown":
            await self._serve_shutdown(rid)
            return
        handler = self._handlers.get(method)
        try:
            if handler is None:
                raise WireError(f"unknown DeepSeek Harness SDK runtime method: {method}")
            result = await handler(params)
            self.out.send({"jsonrpc": "2.0", "id": rid, "result": result})
        except Exception as exc:
            self.out.send(_error_frame(rid, exc))

    # -- notifications ------------------------------------------------------------------------

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        try:
            self.out.send({"jsonrpc": "2.0", "method": method, "params": params})
        except ValueError:
            log.warning("dropped a %s notification JSON cannot carry", method, exc_info=True)

    def _announce(self, session: Session, parent: str | None = None) -> None:
        """``subagent.started`` once per child per process, before any other frame naming it (O2)."""
        parent = parent or session.header.get("parentSession")
        if parent and session.id not in self._announced:
            self._announced.add(session.id)
            self._notify("subagent.started", {"parentSessionId": parent, "childSessionId": session.id})

    def _on_session_event(self, session: Session, event: Event) -> None:
        self._announce(session)
        self._notify("session.event", {"sessionId": session.id, "event": event})
        if event["type"].startswith("team/"):
            self._send_team(session.id)
        if event["type"] == "turn/end":
            entry = self._sessions.get(session.id)
            if entry is not None and entry.failure is not None and event["seq"] >= entry.failure[0]:
                entry.failure = None

    def _send_team(self, lead_id: str) -> None:
        """``pydsh.team`` on opt-in: the roster a live Lead's ``list_agents`` shows, routes included."""
        teams = self.ctx.get("agent_teams")
        lead = self.agents.get(lead_id)
        if not self._team or teams is None or lead is None:
            return
        membership = teams.try_membership(lead)
        if membership is None or membership.role != "lead":
            return
        try:
            members = teams.roster(lead)
        except TeamError:
            log.debug("no pydsh.team for %s: its Team failed to rebuild", lead_id)
            return
        self._notify(TEAM_NOTIFICATION, {"sessionId": lead_id, "members": members})

    def _on_session_created(self, session: Session) -> None:
        self._announce(session)

    def _on_status(self, payload: dict[str, Any]) -> None:
        agent: Agent = payload["agent"]
        self._announce(agent.session)
        self._notify("session.status", {"sessionId": agent.id, "status": payload["status"]})

    def _on_error(self, payload: dict[str, Any]) -> None:
        agent: Agent = payload["agent"]
        entry = self._sessions.get(agent.id)
        if entry is not None and entry.agent is agent:
            entry.failure = (agent.session.seq, error_message(payload["error"]))

    def _on_stream(self, payload: dict[str, Any]) -> None:
        frame = payload["frame"]
        if not self._deltas or frame["type"] != "chunk":
            return
        chunk = frame["chunk"]
        kind = DELTA_KINDS.get(chunk.get("type"))
        if kind is None:
            return
        block_type, key = kind
        params = {"sessionId": payload["agent"].id, "turn": frame["turn"], "step": frame["step"]}
        params |= {"index": frame["index"], "blockType": block_type, "delta": chunk[key]}
        self._notify(DELTA_NOTIFICATION, params)

    def _on_subagent_end(self, payload: dict[str, Any]) -> None:
        if not payload.get("local"):
            return
        child: str = payload["id"]
        live = self.sessions.get(child)
        parent = payload.get("parent_id") or (live.header.get("parentSession") if live is not None else None)
        if live is not None:
            self._announce(live, parent)
        stop = payload["stop_reason"]
        ok = stop == "completed" or (stop == "max-tokens" and self.config.maxTokensAsSuccess)
        params = {"provider": payload["provider"], "agentId": child, "parentSessionId": parent}
        params |= {"childSessionId": child, "status": "ok" if ok else "error", "stopReason": stop}
        if payload.get("last_assistant_message"):
            params["lastAssistantMessage"] = payload["last_assistant_message"]
        self._notify("subagent.finished", params)

    async def _pace_stream(self, options: dict[str, Any], nxt: Callable[[], Awaitable[Any]]) -> Any:
        """Model calls start, and pull each chunk, only while the client keeps up with the frames."""
        await self.out.writable()
        source = await nxt()
        return None if source is None else _paced(source, self.out.writable)

    # -- guards -------------------------------------------------------------------------------

    def _initialized(self) -> Defaults:
        if self._defaults is None:
            raise WireError("SDK server is not initialized")
        return self._defaults

    def _accepting(self) -> None:
        if self._shutting_down:
            raise WireError("SDK server is shutting down")

    @staticmethod
    def _storable(label: str, session_id: str) -> str:
        """``session_id`` when a session of that name can be stored; refused before anything is created."""
        problem = session_id_problem(session_id)
        if problem is not None:
            raise WireError(f"{label} session id {problem}")
        return session_id

    def _live_agent(self, session_id: str, entry: OpenSession) -> Agent:
        """The entry's live agent; one the server's own teardown disposed reads as "shutting down"."""
        agent = entry.agent
        if self.agents.get(session_id) is not agent:
            self._accepting()
            raise WireError(f"session agent was disposed outside the server: {session_id}")
        return agent

    # -- methods ------------------------------------------------------------------------------

    async def _initialize(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = InitializeParams.model_validate(raw)
        await self._ensure_adapter(params.provider)
        config: dict[str, Any] = {"provider": params.provider, "model": params.model}
        if params.reasoningEffort is not None:
            config["reasoningEffort"] = params.reasoningEffort
        if params.maxTokens is not None:
            config["maxTokens"] = params.maxTokens
        await self.ctx.require("llm").resolve_call_config(config)
        options = AgentOptions(
            provider=params.provider,
            model=params.model,
            max_tokens=params.maxTokens,
            reasoning_effort=params.reasoningEffort,
        )
        self._defaults = Defaults(os.path.abspath(params.cwd), options)
        self._deltas, self._team = params.deltas, params.team
        extensions = [name for name, on in (("deltas", params.deltas), ("team", params.team)) if on]
        return {"serverInfo": dict(SERVER_INFO), "pydsh": {"version": __version__, "extensions": extensions}}

    async def _ensure_adapter(self, provider: str) -> None:
        """A route no adapter owns fails, except the built-in DeepSeek one, whose row is activated here."""
        from pydsh.llm.service import no_adapter

        llm = self.ctx.require("llm")
        if llm.has_adapter(provider):
            return
        if provider == "deepseek-official" and self._adapter_fiber is None:
            from pydsh.kernel.compose import Row

            loader = self.ctx.runtime.loader
            self._adapter_fiber = loader.add_row(self.ctx, Row(id="sdk-llm-deepseek", name="llm-deepseek"))
            await loader.settle()
        if not llm.has_adapter(provider):
            raise no_adapter(provider)

    async def _prompt(self, raw: dict[str, Any]) -> dict[str, Any]:
        self._initialized()
        self._accepting()
        params = PromptParams.model_validate(raw)
        session_id = self._storable("session/prompt", params.sessionId)
        if params.has_inline_image:
            raise WireError("SDK image prompt requires an attachment store")
        message = user_message(params.contentBlocks, {"kind": "user"})
        async with self._admission.hold(session_id):
            entry = await self._open(session_id)
            self._live_agent(session_id, entry).followup(message)
        return {"messageId": message["id"]}

    async def _resume(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = ResumeParams.model_validate(raw)
        defaults = self._initialized()
        self._accepting()
        session_id = self._storable("session/resume", params.sessionId)
        if session_id in self._sessions or session_id in self._opening or self.sessions.get(session_id):
            raise WireError(f"SDK session is already open or opening: {session_id}")

        async def resume() -> AgentHandle:
            return await self.agents.resume(session_id, agent_options=defaults.options, setup=preset_setup(self.ctx))

        await self._track(session_id, resume)
        return {}

    async def _wait(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = WaitParams.model_validate(raw)
        self._initialized()
        session_id = params.sessionId
        opening = self._opening.get(session_id)
        if opening is not None:
            await asyncio.wait([opening])
        entry = self._sessions.get(session_id)
        if entry is None:
            raise WireError(f"unknown SDK session: {session_id}")
        agent = entry.agent
        subagents = self.ctx.get("subagents")
        while True:
            await agent.when_idle()
            idle_seq = agent.session.seq
            waited = bool(await subagents.wait_for_children(agent)) if subagents is not None else False
            if not waited and agent.status == "idle" and agent.session.seq == idle_seq:
                break
        if entry.failure is not None:
            raise WireError(entry.failure[1])
        return {}

    async def _get_cwd(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = WorkingDirectoryParams.model_validate(raw)
        agent = await self._cwd_agent(params.sessionId)
        return {"cwd": self.ctx.require("working_directory").current(agent)}

    async def _set_cwd(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = SetWorkingDirectoryParams.model_validate(raw)
        agent = await self._cwd_agent(params.sessionId)
        return {"cwd": self.ctx.require("working_directory").change(agent, params.path)}

    async def _cwd_agent(self, session_id: str) -> Agent:
        self._initialized()
        self._accepting()
        self._storable("working-directory", session_id)
        async with self._admission.hold(session_id):
            entry = await self._open(session_id)
            return self._live_agent(session_id, entry)

    # -- opening sessions ---------------------------------------------------------------------

    async def _open(self, session_id: str) -> OpenSession:
        """The session's entry, creating a new root session once however many requests ask at once."""
        entry = self._sessions.get(session_id)
        if entry is not None:
            return entry
        if session_id in self._opening:
            return await asyncio.shield(self._opening[session_id])
        defaults = self._initialized()

        async def create() -> AgentHandle:
            persistence: SessionPersistence | None = self.ctx.get("session_persistence")
            stored = persistence is not None and await persistence.exists(session_id)
            if self.sessions.get(session_id) is None and stored:
                raise WireError(f'session "{session_id}" already exists')
            opts = CreateAgentOptions(
                session_id=session_id,
                cwd=defaults.cwd,
                agent_options=defaults.options,
                agent_preset=header_preset(self.ctx, None),
                setup=preset_setup(self.ctx),
            )
            return await self.agents.create(opts)

        return await self._track(session_id, create)

    async def _track(self, session_id: str, opener: Callable[[], Awaitable[AgentHandle]]) -> OpenSession:
        async def run() -> OpenSession:
            entry = OpenSession(await opener())
            self._sessions[session_id] = entry
            return entry

        task = asyncio.ensure_future(run())
        self._opening[session_id] = task
        task.add_done_callback(lambda done: self._forget_opening(session_id, done))
        return await asyncio.shield(task)

    def _forget_opening(self, session_id: str, task: asyncio.Task[OpenSession]) -> None:
        if self._opening.get(session_id) is task:
            del self._opening[session_id]
        if not task.cancelled():
            task.exception()

    # -- teardown -----------------------------------------------------------------------------

    async def _serve_shutdown(self, rid: str | float) -> None:
        outcome = await self._begin_teardown()
        if outcome.errors:
            detail = outcome.errors[0] if len(outcome.errors) == 1 else "; ".join(outcome.errors)
            message = detail if len(outcome.errors) == 1 else f"SDK server teardown failed: {detail}"
            frame: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "error": {"code": INTERNAL_ERROR, "message": message}}
        else:
            frame = {"jsonrpc": "2.0", "id": rid, "result": {}}
        self.out.send(frame)
        await self._finish(1 if outcome.errors else 0, outcome)

    def on_input_closed(self) -> None:
        """End of stdin (or a broken stdout): the shutdown teardown without a response, exit 0."""
        if self._teardown is None:
            self._spawn(self._quiet_shutdown(lambda outcome: 0))

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals > 1:
            os._exit(1)
        if self._teardown is None:
            self._spawn(self._quiet_shutdown(lambda outcome: 0 if outcome.completed else 1))

    async def _quiet_shutdown(self, exit_code: Callable[[Teardown], int]) -> None:
        await self._ready.wait()
        outcome = await self._begin_teardown()
        for message in outcome.errors:
            print(f"pydsh: sdk: teardown failed: {message}", file=sys.stderr)
        await self._finish(exit_code(outcome), outcome)

    async def _finish(self, code: int, outcome: Teardown) -> None:
        self.out.seal()
        await self.out.flush()
        if outcome.overran:
            _hard_exit_later(code)
        if not self._exit.done():
            self._exit.set_result(code)

    def _begin_teardown(self) -> asyncio.Task[Teardown]:
        if self._teardown is None:
            self._shutting_down = True
            self._teardown = asyncio.ensure_future(self._bounded_teardown())
        return self._teardown

    async def _bounded_teardown(self) -> Teardown:
        work = asyncio.ensure_future(self._teardown_steps())
        done, _ = await asyncio.wait([work], timeout=TEARDOWN_BOUND_S)
        if not done:
            unfinished = ", ".join(sorted(self._pending)) or "pending session creations"
            print(f"pydsh: sdk: teardown exceeded {TEARDOWN_BOUND_S:g} s; unfinished: {unfinished}", file=sys.stderr)
            return Teardown(overran=True)
        return work.result()

    async def _teardown_steps(self) -> Teardown:
        if self._opening:
            await asyncio.wait(list(self._opening.values()))
        for remove in self._listeners:
            remove()
        errors: list[str] = []
        subagents = self.ctx.get("subagents")
        if subagents is not None and self._sessions:
            self._pending.add("subagent drain")
            try:
                await subagents.drain(list(self._sessions))
            except Exception as exc:
                errors.append(error_message(exc))
            self._pending.discard("subagent drain")
        results = await asyncio.gather(
            *(self._dispose(sid, entry) for sid, entry in self._sessions.items()), return_exceptions=True
        )
        errors += [error_message(r) for r in results if isinstance(r, BaseException)]
        if self._adapter_fiber is not None:
            self._pending.add("activated DeepSeek adapter")
            errors += [error_message(e) for e in await self.ctx.runtime.loader.dispose(self._adapter_fiber)]
            self._pending.discard("activated DeepSeek adapter")
        return Teardown(errors)

    async def _dispose(self, session_id: str, entry: OpenSession) -> None:
        label = f"session {session_id}"
        self._pending.add(label)
        try:
            await entry.handle.dispose()
        finally:
            self._pending.discard(label)


async def _paced(source: AsyncIterator[Any], ready: Callable[[], Awaitable[None]]) -> AsyncIterator[Any]:
    """``source`` chunk by chunk, the next one pulled only once ``ready`` returns."""
    try:
        async for chunk in source:
            yield chunk
            await ready()
    finally:
        closer = getattr(source, "aclose", None)
        if closer is not None:
            await closer()


def _warn_long_line(limit: int) -> None:
    print(f"pydsh: sdk: discarded an inbound line longer than {limit} bytes", file=sys.stderr, flush=True)


def _error_frame(rid: str | float, exc: BaseException) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": INTERNAL_ERROR, "message": error_message(exc)}}


def _hard_exit_later(code: int) -> None:
    """After an overrun teardown the host's own disposal may hang on the same work: bound it too."""
    timer = threading.Timer(TEARDOWN_BOUND_S, os._exit, (code,))
    timer.daemon = True
    timer.start()


name = "sdk-server"
inject = ("agents", "sessions", "llm")


async def apply(ctx: Context, config: Config) -> None:
    """Take over stdio, start reading requests, and provide the ``app`` service."""
    server: SdkServer | None = None

    def output_lost() -> None:
        if server is not None:
            server.on_input_closed()

    channel = StdioChannel(output_lost)
    ctx.register(channel.close)
    await channel.writer.open()
    server = SdkServer(ctx, config, channel)
    pump = asyncio.ensure_future(server.pump())
    ctx.register(pump.cancel)
    ctx.provide("app", server)
