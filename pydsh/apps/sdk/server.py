"""The SDK server: newline-delimited JSON-RPC 2.0 requests on stdio (spec 06), served over the host.

Seven methods; every session is a root agent of the host (opened once per id, prompts acknowledged
only once they are on disk). Frames leave through one writer; teardown is bounded.
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
from typing import TYPE_CHECKING, Any

from pydsh import __version__
from pydsh.agent.keys import AGENTS, WORKING_DIRECTORY
from pydsh.apps.sdk.notify import Notifier, error_message
from pydsh.apps.stdio import FrameWriter, StdinReader, hurry, pace_model_streams
from pydsh.host import Agent, AgentSpec, HostError
from pydsh.host.workspace import check_workspace
from pydsh.kernel.config import BaseModel, ConfigDict, field_validator
from pydsh.llm.keys import LLM
from pydsh.session.ids import session_id_problem
from pydsh.wire.framing import LineSplitter, decode_line
from pydsh.wire.protocol import (
    INTERNAL_ERROR,
    SERVER_INFO,
    InitializeParams,
    PromptParams,
    ResumeParams,
    SetWorkingDirectoryParams,
    WaitParams,
    WireError,
    WorkingDirectoryParams,
    echo_id,
    is_request_id,
)

if TYPE_CHECKING:
    from pydsh.host import Host
    from pydsh.kernel.context import Context
    from pydsh.kernel.fiber import Disposer, Fiber

log = logging.getLogger("pydsh.sdk")

HELP = """\
Usage: pydsh --profile sdk [options]

Serve DeepSeek Harness SDK clients over stdio JSON-RPC.

Options:
  -h, --help  show this help

Example:
  pydsh --profile sdk     serve one SDK runtime until its client disconnects
"""

TEARDOWN_BOUND_S = 5.0


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


@dataclass
class Teardown:
    """Outcome of the bounded teardown: failure messages, or the items still unfinished at the bound."""

    errors: list[str] = field(default_factory=list)
    overran: bool = False

    @property
    def completed(self) -> bool:
        return not self.errors and not self.overran


Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class SdkServer:
    """The ``app`` service of the SDK profiles: one JSON-RPC peer on stdio, over the process's host."""

    def __init__(self, ctx: Context, config: Config, out: FrameWriter, stdin: StdinReader) -> None:
        self.ctx = ctx
        self.out = out
        self.stdin = stdin
        self.notifier = Notifier(ctx, out, config.maxTokensAsSuccess)
        self._host: Host | None = None
        self._defaults: AgentSpec | None = None
        self._admission = AdmissionLocks()
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
        self._pacing: Disposer = pace_model_streams(ctx, out)

    @property
    def host(self) -> Host:
        assert self._host is not None, "requests are served only once the app runs"
        return self._host

    # -- app ----------------------------------------------------------------------------------

    async def run(self, host: Host, args: list[str]) -> int:
        """Serve until ``shutdown``, end of input, a broken stdout or a signal; returns the exit code."""
        if "-h" in args or "--help" in args:
            self.out.write(HELP.encode())
            await self.out.flush()
            return 0
        if args:
            print("error: too many arguments", file=sys.stderr)
            return 1
        self._host = host
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
            chunk = await self.stdin.read()
            if not chunk:
                for line in splitter.finish():
                    self._receive(line)
                self.on_input_closed()
                return
            # served ahead of the session steps already waiting, in the order sent: a cheap request is
            # answered at once however many sessions are stepping
            hurry(*[task for line in splitter.feed(chunk) if (task := self._receive(line)) is not None])

    def _receive(self, line: bytes) -> asyncio.Task[None] | None:
        """Start serving one request line (``None`` for a line that is no request)."""
        message = decode_line(line)
        if not isinstance(message, dict):
            return None
        rid, method = message.get("id"), message.get("method")
        if not is_request_id(rid) or not isinstance(method, str):
            return None
        answer_id = echo_id(rid)
        if answer_id is None:
            print(f"pydsh: sdk: ignored a request whose id JSON cannot carry back: {rid!r}", file=sys.stderr)
            return None
        params = message.get("params")
        return self._spawn(self._serve(answer_id, method, params if isinstance(params, dict) else {}))

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

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

    # -- guards -------------------------------------------------------------------------------

    def _initialized(self) -> AgentSpec:
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

    def _live(self, agent: Agent) -> Agent:
        """``agent`` while it is live; one disposed by the server's own teardown reads as "shutting down"."""
        if self.ctx.require(AGENTS).get(agent.session_id) is not agent.live:
            self._accepting()
            raise WireError(f"session agent was disposed outside the server: {agent.session_id}")
        return agent

    # -- methods ------------------------------------------------------------------------------

    async def _initialize(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = InitializeParams.model_validate(raw)
        try:
            cwd = check_workspace(os.path.abspath(params.cwd))
        except HostError as exc:
            raise WireError(f"initialize {exc}") from None
        await self._ensure_adapter(params.provider)
        config: dict[str, Any] = {"provider": params.provider, "model": params.model}
        if params.reasoningEffort is not None:
            config["reasoningEffort"] = params.reasoningEffort
        if params.maxTokens is not None:
            config["maxTokens"] = params.maxTokens
        await self.ctx.require(LLM).resolve_call_config(config)
        self._defaults = AgentSpec(cwd, params.provider, params.model, params.reasoningEffort, params.maxTokens)
        self.notifier.deltas, self.notifier.team = params.deltas, params.team
        extensions = [name for name, on in (("deltas", params.deltas), ("team", params.team)) if on]
        return {"serverInfo": dict(SERVER_INFO), "pydsh": {"version": __version__, "extensions": extensions}}

    async def _ensure_adapter(self, provider: str) -> None:
        """A route no adapter owns fails, except the built-in DeepSeek one, whose row is activated here."""
        from pydsh.llm.service import no_adapter

        llm = self.ctx.require(LLM)
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
        async with self._admission.hold(session_id):
            agent = self._live(await self._open(session_id))
            receipt = await agent.submit(await self._images(agent, params.contentBlocks))
        return {"messageId": receipt.message_id}

    async def _images(self, agent: Agent, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The prompt with its inline images stored (refused with the reason when they cannot be)."""
        from pydsh.images.prompt import ImagePromptError, admit_images

        try:
            return await admit_images(self.ctx, agent.live, blocks)
        except ImagePromptError as exc:
            raise WireError(str(exc)) from None

    async def _resume(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = ResumeParams.model_validate(raw)
        defaults = self._initialized()
        self._accepting()
        session_id = self._storable("session/resume", params.sessionId)
        try:
            await self.host.resume(session_id, AgentSpec(None, *_route(defaults)))
        except HostError as exc:
            if exc.code == "already_open":
                raise WireError(f"SDK session is already open or opening: {session_id}") from None
            raise
        self.notifier.watched.add(session_id)
        return {}

    async def _wait(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = WaitParams.model_validate(raw)
        self._initialized()
        agent = await self.host.opened(params.sessionId)
        if agent is None:
            raise WireError(f"unknown SDK session: {params.sessionId}")
        await agent.settle()
        failure = self.notifier.failures.get(agent.session_id)
        if failure is not None:
            raise WireError(failure[1])
        return {}

    async def _get_cwd(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = WorkingDirectoryParams.model_validate(raw)
        agent = await self._cwd_agent(params.sessionId)
        return {"cwd": self.ctx.require(WORKING_DIRECTORY).current(agent.live)}

    async def _set_cwd(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = SetWorkingDirectoryParams.model_validate(raw)
        agent = await self._cwd_agent(params.sessionId)
        return {"cwd": self.ctx.require(WORKING_DIRECTORY).change(agent.live, params.path)}

    async def _cwd_agent(self, session_id: str) -> Agent:
        self._initialized()
        self._accepting()
        self._storable("working-directory", session_id)
        async with self._admission.hold(session_id):
            return self._live(await self._open(session_id))

    async def _open(self, session_id: str) -> Agent:
        """The session's agent, creating a new root session once however many requests ask at once."""
        agent = await self.host.open_agent(session_id, create=self._initialized())
        self.notifier.watched.add(session_id)
        return agent

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
        await self.host.openings()
        self.notifier.detach()
        self._pacing()
        errors = [error_message(e) for e in await self.host.close_agents(self._pending)]
        if self._adapter_fiber is not None:
            self._pending.add("activated DeepSeek adapter")
            errors += [error_message(e) for e in await self.ctx.runtime.loader.dispose(self._adapter_fiber)]
            self._pending.discard("activated DeepSeek adapter")
        return Teardown(errors)


def _route(spec: AgentSpec) -> tuple[str | None, str | None, str | None, int | None]:
    """The route and budget of ``spec`` (what a resumed session runs with: the initialized ones)."""
    return spec.provider, spec.model, spec.reasoning_effort, spec.max_tokens


def _warn_long_line(limit: int) -> None:
    print(f"pydsh: sdk: discarded an inbound line longer than {limit} bytes", file=sys.stderr, flush=True)


def _error_frame(rid: str | float, exc: BaseException) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": INTERNAL_ERROR, "message": error_message(exc)}}


def _hard_exit_later(code: int) -> None:
    """After an overrun teardown the host's own disposal may hang on the same work: bound it too."""
    timer = threading.Timer(TEARDOWN_BOUND_S, os._exit, (code,))
    timer.daemon = True
    timer.start()
