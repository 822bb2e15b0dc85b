"""The agent loop: agent creation/resume transactions, the driver, and the turn/step algorithm (spec 03).

A :class:`LoopAgent` owns one session. ``send`` queues input through the inbox and wakes the
driver; the driver runs turns while input is pending; each turn runs steps while the model
calls tools or steering is queued. Every request is built from the log (P2); every failure ends
the turn, never the loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydsh.agent.attempt import Attempt
from pydsh.agent.hooks import (
    AGENT_CREATED,
    AGENT_ERROR,
    AGENT_STATUS,
    PRE_STEP,
    REQUEST_ERROR,
    STEP_PREPARING,
    TURN_STOPPING,
    AgentCreated,
    AgentFailed,
    AgentStatus,
    InboxChange,
    PreStep,
    PreStepDecision,
    RequestError,
    StepPreparing,
    TurnStopping,
)
from pydsh.agent.inbox import Inbox
from pydsh.agent.keys import AGENT_DEFAULT_MODEL, AGENT_LOOP, AGENTS, SYSTEM_PROMPT
from pydsh.agent.registry import AgentRegistry, CreateAgentOptions, Setup
from pydsh.agent.request import RequestBuilder
from pydsh.agent.runtime_context import is_runtime_context, project_snapshot, project_system_prompt
from pydsh.agent.tool_calls import ToolCallScheduler
from pydsh.contract.agent import AgentOptions, Status, Target, UserMessage
from pydsh.kernel.cancel import AbortController, AbortSignal
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.kernel.events import Emit
from pydsh.kernel.keys import INVARIANTS
from pydsh.kernel.scope import Scope, create_scope
from pydsh.llm.hooks import LLM_STREAM
from pydsh.llm.keys import LLM
from pydsh.llm.types import LlmError
from pydsh.session.events import FrozenDict, make_header
from pydsh.session.keys import SESSION_PERSISTENCE, SESSIONS
from pydsh.session.log import Session, SessionStore, new_session_id, now_ms
from pydsh.session.persistence.base import SessionHandle, SessionPersistence
from pydsh.session.repair import closer_result, tail_state, tail_turn_closers

log = logging.getLogger("pydsh.agent")


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    maxParallelToolCalls: int = Field(default=10, ge=1)


def copy_cause(reason: object) -> dict[str, Any]:
    """A plain copy of a cancel cause (``{kind}``, plus ``reason`` for hooks)."""
    if isinstance(reason, dict) and isinstance(reason.get("kind"), str):
        out = {"kind": reason["kind"]}
        if reason["kind"] == "hook":
            out["reason"] = str(reason.get("reason", ""))
        return out
    return {"kind": "user"}


def failure_of(exc: BaseException) -> dict[str, Any]:
    """The ``LlmFailure`` a failed turn records: the provider's, or ``UNKNOWN`` with the error chain."""
    if isinstance(exc, LlmError):
        return dict(exc.failure())
    return {"message": error_chain(exc), "code": "UNKNOWN"}


def error_chain(exc: BaseException) -> str:
    """``str(e)`` (or the class name), exception-group members, then the ``__cause__`` chain."""
    seen: set[int] = set()

    def render(e: BaseException) -> str:
        if id(e) in seen:
            return "<circular cause>"
        seen.add(id(e))
        text = str(e) or type(e).__name__
        if isinstance(e, BaseExceptionGroup):
            text += " [" + "; ".join(render(m) for m in e.exceptions) + "]"
        cause = e.__cause__
        if cause is not None and cause is not e:
            text += ": " + render(cause)
        return text

    return render(exc)


@dataclass
class Decision:
    kind: str
    messages: list[UserMessage]
    assembly: Any = None
    starts_request_series: bool = False


class LoopAgent:
    """One live agent and its driver."""

    def __init__(self, loop: AgentLoop, session: Session, options: AgentOptions) -> None:
        self.loop = loop
        self.session = session
        self.id = session.id
        self.options = options
        self.scope: Scope = create_scope(loop.ctx, self)
        self.ctx = self.scope.ctx
        session.scope = self
        self.inbox = Inbox(session, self._notify_inbox)
        self.requests = RequestBuilder(self)
        self._phase = "idle"
        self._status: Status = "idle"
        self._abort: AbortController | None = None
        self._activity: asyncio.Task[Any] | None = None
        self._wake_requested = False
        self.last_turn = _last_turn(session)
        self.turn = 0
        self.step = 0
        self._attempts = 0
        self._preparing = False
        self._self_fed: set[str] = set()
        self.disposed = False

    def __repr__(self) -> str:
        return f"<LoopAgent {self.id} {self._status}>"

    @staticmethod
    def new_id() -> str:
        return str(uuid.uuid4())

    @property
    def status(self) -> Status:
        return self._status

    def _set_status(self, status: Status) -> None:
        if status != self._status:
            self._status = status
            self.ctx.emit(AGENT_STATUS, AgentStatus(agent=self, status=status), scope=self)

    def _notify_inbox(self, event: Emit[InboxChange], message: UserMessage, turn: int | None) -> None:
        change = InboxChange(agent=self, message=message)
        if turn is not None:
            change["turn"] = turn
        self.ctx.emit(event, change, scope=self)

    # -- input ------------------------------------------------------------------------------

    def send(self, message: UserMessage, target: Target, wakeup: bool) -> None:
        """Queue ``message``; a waking send after an abort goes to the next turn (spec 03 §4.2)."""
        aborted = self._abort is not None and self._abort.signal.aborted
        waking_after_abort = wakeup and self._phase != "idle" and aborted
        if waking_after_abort:
            target = "next-turn"
        if self._preparing and asyncio.current_task() is self._activity:
            self._self_fed.add(message["id"])
        self.inbox.append(target, message)
        if wakeup:
            self._wake(waking_after_abort)

    def followup(self, message: UserMessage) -> None:
        self.send(message, "next-turn", True)

    def steer(self, message: UserMessage) -> None:
        self.send(message, "next-step", True)

    def inject(self, message: UserMessage) -> None:
        self.send(message, "next-step", False)

    def _wake(self, after_abort: bool = False) -> None:
        if self.disposed:
            return
        if self._phase != "idle":
            signal = self._abort.signal if self._abort is not None else None
            disposed = signal is not None and signal.aborted and copy_cause(signal.reason)["kind"] == "disposed"
            if not disposed and (self._phase == "maintenance" or after_abort):
                self._wake_requested = True
            return
        self._abort = AbortController()
        self._phase = "running"
        self.turn, self.step = self.last_turn, 0
        self._wake_requested = False
        self._set_status("running")
        registry: AgentRegistry = self.loop.agents
        self._activity = asyncio.get_running_loop().create_task(registry.with_initiator(self, self._kick))

    async def _kick(self) -> None:
        try:
            while await self._turn():
                pass
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and not self._aborted():
                raise
        finally:
            if self._phase == "running":
                self._phase = "idle"
                self.last_turn = self.turn
                self._set_status("idle")
                if self._wake_requested and self.inbox.has_pending:
                    self._wake()

    def _aborted(self) -> bool:
        return self._abort is not None and self._abort.signal.aborted

    # -- control ----------------------------------------------------------------------------

    def cancel(self, cause: dict[str, Any], *, keep_inbox: bool = False) -> None:
        """Abort the running activity with ``cause``; without ``keep_inbox`` drop pending input."""
        if not keep_inbox:
            self.inbox.clear()
            self._self_fed.clear()
            if self._phase != "idle":
                self._wake_requested = False
        if self._phase != "idle" and self._abort is not None:
            self._abort.abort(dict(cause))

    async def when_idle(self) -> None:
        while self._activity is not None and not self._activity.done():
            activity = self._activity
            await asyncio.wait([activity])

    async def run_maintenance(self, job: Callable[[AbortSignal], Awaitable[Any]]) -> Any:
        """Run ``job`` from true idle while the status stays idle; latched wakes replay afterwards."""
        if self._phase != "idle":
            raise RuntimeError(f'agent "{self.id}" already has active work')
        self._phase = "maintenance"
        self._abort = AbortController()
        self._wake_requested = False
        signal = self._abort.signal

        async def run() -> Any:
            return await job(signal)

        task = asyncio.get_running_loop().create_task(run())
        self._activity = task
        try:
            return await task
        finally:
            self._phase = "idle"
            if self._wake_requested and self.inbox.has_pending:
                self._wake()

    # -- turn -------------------------------------------------------------------------------

    async def _turn(self) -> bool:
        assert self._abort is not None
        signal = self._abort.signal
        signal.throw_if_aborted()
        turn = self.turn + 1
        self.session.append("turn/start", {"turn": turn})
        self.turn, self.step = turn, 0
        ends: dict[str, Any] | None = None
        target: Target = "next-turn"
        try:
            while True:
                signal.throw_if_aborted()
                step = self.step + 1
                decision = await self._pre_step(target, turn, step, signal)
                if decision.kind == "reject":
                    ends = {"kind": "blocked"}
                    return False
                if ends is not None and not decision.messages:
                    break
                if self.step == 0 and not decision.messages:
                    ends = {"kind": "completed"}
                    return False
                signal.throw_if_aborted()
                step_start = self.session.append("step/start", {"turn": turn, "step": step})["seq"]
                self.step = step
                try:
                    step_end = await self._run_step(decision, signal)
                    if ends is None or ends["kind"] != "max-tokens":
                        ends = step_end
                except BaseException:
                    self._answer_unanswered(step_start)
                    raise
                finally:
                    self.session.append("step/end", {"turn": turn, "step": step})
                signal.throw_if_aborted()
                if ends is not None and not self._step_input():
                    await self.ctx.serial(TURN_STOPPING, TurnStopping(agent=self, turn=turn, signal=signal), scope=self)
                    signal.throw_if_aborted()
                if ends is not None and not self._step_input():
                    break
                target = "next-step"
        except BaseException as exc:
            if signal.aborted:
                ends = {"kind": "aborted", "reason": copy_cause(signal.reason)}
            else:
                failure = (
                    exc.failure() if isinstance(exc, LlmError) else {"message": error_chain(exc), "code": "UNKNOWN"}
                )
                ends = {"kind": "error", "error": failure}
                self.ctx.emit(AGENT_ERROR, AgentFailed(agent=self, turn=turn, step=self.step, error=exc), scope=self)
                if not isinstance(exc, (LlmError, asyncio.CancelledError)):
                    log.warning('agent "%s" turn %d failed: %s', self.id, turn, error_chain(exc))
            raise
        finally:
            self._preparing = False
            self.session.append("turn/end", {"turn": turn, "reason": ends or {"kind": "completed"}})
        if not (self.inbox.next_turn or self._step_input()):
            return False
        self._abort = AbortController()
        self._wake_requested = False
        self.step = 0
        return True

    def _step_input(self) -> bool:
        """Whether ``next-step`` input calls for another step: anything but what this agent queued for
        itself while preparing a step. That input rides along with the next step another cause starts;
        letting it start one would let every step queue the input of the next, forever (spec 03 §12)."""
        return any(m["id"] not in self._self_fed for m in self.inbox.next_step)

    def _answer_unanswered(self, step_start: int) -> None:
        """Interrupted results for calls of the failing step that have none (spec 03 §5)."""
        state = tail_state(self.session.events[step_start:])
        for call in state.pending.values():
            event = closer_result(call, "interrupted", len(self.session.events), self.session.last_time)
            self.session.append(
                "tool/result",
                event["data"],
                surface_op="append",
                source_event_seqs=event.get("sourceEventSeqs"),
            )

    async def _pre_step(self, target: Target, turn: int, step: int, signal: AbortSignal) -> Decision:
        claimed = self.inbox.claim(target, turn)
        self._self_fed.difference_update(m["id"] for m in claimed)
        self._preparing = True
        self.ctx.emit(STEP_PREPARING, StepPreparing(agent=self, turn=turn, step=step, claimed=claimed), scope=self)
        prompt = self.loop.system_prompt
        assembly = await prompt.assemble(agent=self, signal=signal)

        async def default() -> PreStepDecision:
            snapshot = project_snapshot(self.session, prompt.render_contexts(assembly))
            return {"kind": "enter", "messages": [*claimed, *([snapshot] if snapshot else [])]}

        payload = PreStep(agent=self, messages=claimed, turn=turn, step=step, signal=signal)
        result = await self.ctx.waterfall(PRE_STEP, payload, default, scope=self)
        if result["kind"] == "reject":
            return Decision("reject", [])
        return Decision(
            "enter",
            list(result.get("messages", [])),
            assembly,
            bool(result.get("startsRequestSeries")),
        )

    # -- step -------------------------------------------------------------------------------

    async def _run_step(self, decision: Decision, signal: AbortSignal) -> dict[str, Any] | None:
        prompt = self.loop.system_prompt
        rendered = prompt.render(decision.assembly)
        first_attempt = True
        while True:
            config, prepared = await self.requests.prepare(self.turn, self.step, signal)
            snapshot = project_snapshot(self.session, prompt.render_contexts(decision.assembly))
            requested_series = first_attempt and decision.starts_request_series
            tools = decision.assembly.tools
            starts = self.requests.starts_series(requested_series) or self.requests.tools_changed(prepared, tools)
            in_history = prepared is not None and prepared.system_prompt_update == "in-history"
            for update in project_system_prompt(self.session, rendered, in_history=in_history, starts_series=starts):
                data = {"turn": self.turn, "step": self.step, "message": update.message}
                self.session.append(
                    "system/message", data, surface_op=update.surface_op, source_event_seqs=update.sources
                )
            if first_attempt:
                self._enter_messages(decision.messages, snapshot)
            elif snapshot is not None:
                self.session.append("user/message", snapshot, surface_op="append")
            first_attempt = False
            request = self.requests.build(config, prepared, tools, requested_series)
            self._preparing = False
            await asyncio.sleep(0)
            result = await self._attempt(request, prepared, signal)
            if result.failure is not None:
                if await self._recovers(request["provider"], result.failure, prepared, signal):
                    continue
                raise LlmError(
                    result.failure.get("message", "model call failed"),
                    result.failure.get("code", "UNKNOWN"),
                    status=result.failure.get("status"),
                    provider_retry_after_ms=result.failure.get("providerRetryAfterMs"),
                    request_id=result.failure.get("requestId"),
                )
            if result.finish.get("kind") == "max-tokens":
                return {"kind": "max-tokens"}
            calls = [b for b in result.event["data"]["message"]["content"] if b.get("type") == "tool-call"]
            if not calls:
                return {"kind": "completed"}
            concluded = await ToolCallScheduler(self, self.turn, self.step, signal).run(calls)
            return {"kind": "completed"} if concluded else None

    def _enter_messages(self, messages: list[UserMessage], snapshot: UserMessage | None) -> None:
        appended_snapshot = False
        for message in messages:
            if is_runtime_context(message):
                if snapshot is not None and not appended_snapshot:
                    self.session.append("user/message", snapshot, surface_op="append")
                    appended_snapshot = True
                continue
            self.session.append("user/message", message, surface_op="append")
        if snapshot is not None and not appended_snapshot:
            self.session.append("user/message", snapshot, surface_op="append")

    async def _attempt(self, request: dict[str, Any], prepared: Any, signal: AbortSignal) -> Any:
        self._attempts += 1
        attempt = Attempt(self, self.turn, self.step, self._attempts)
        options = FrozenDict({**request, "signal": signal})
        stream = prepared.stream(options) if prepared is not None else self.loop.llm.stream(options)
        return await attempt.run(stream, signal, {"provider": request["provider"], "model": request["model"]})

    async def _recovers(self, provider: str, failure: dict[str, Any], prepared: Any, signal: AbortSignal) -> bool:
        """Ask ``agent/request-error`` listeners (retry, compaction) whether to try the step again."""
        payload = RequestError(
            agent=self,
            turn=self.turn,
            step=self.step,
            provider=provider,
            failure=failure,
            retryPolicy=prepared.retry_policy if prepared is not None else None,
            signal=signal,
        )
        answer = await self.ctx.waterfall(REQUEST_ERROR, payload, lambda: None, scope=self)
        return isinstance(answer, dict) and answer.get("kind") == "retry"


def _last_turn(session: Session) -> int:
    for event in reversed(session.events):
        if event["type"] == "turn/start":
            return int(event["data"]["turn"])
    return 0


class LoopHandle:
    """``{agent, dispose()}`` of a created or resumed agent."""

    def __init__(self, loop: AgentLoop, agent: LoopAgent, handle: SessionHandle | None) -> None:
        self.agent = agent
        self._loop = loop
        self._persistence_handle = handle
        self._disposing: asyncio.Task[None] | None = None

    async def dispose(self) -> None:
        """Cancel (keeping queued input), wait for idle, then unwind scope, log handle and registries."""
        if self._disposing is None:
            self._disposing = asyncio.get_running_loop().create_task(self._dispose(discard=False))
        await asyncio.shield(self._disposing)

    async def abandon(self) -> None:
        """Like :meth:`dispose`, but the log of a never-established agent is not kept (rollback)."""
        if self._disposing is None:
            self._disposing = asyncio.get_running_loop().create_task(self._dispose(discard=True))
        await asyncio.shield(self._disposing)

    async def _dispose(self, *, discard: bool) -> None:
        agent = self.agent
        agent.cancel({"kind": "disposed"}, keep_inbox=True)
        await agent.when_idle()
        agent.disposed = True
        try:
            await agent.scope.dispose()
        finally:
            try:
                if self._persistence_handle is not None:
                    await (_abandon(self._persistence_handle) if discard else self._persistence_handle.close())
            finally:
                self._loop.agents.leave(agent)
                self._loop.sessions.leave(agent.session)
                self._loop.handles.discard(self)


class AgentLoop:
    """The ``agent_loop`` service: the factory behind ``agents.create`` / ``agents.resume``."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.handles: set[LoopHandle] = set()

    @property
    def agents(self) -> AgentRegistry:
        return self.ctx.require(AGENTS)

    @property
    def sessions(self) -> SessionStore:
        return self.ctx.require(SESSIONS)

    @property
    def system_prompt(self) -> Any:
        return self.ctx.require(SYSTEM_PROMPT)

    @property
    def llm(self) -> Any:
        return self.ctx.require(LLM)

    async def prepare_call(self, config: dict[str, Any], signal: AbortSignal) -> Any:
        """``llm.prepare_call``; a route no adapter owns is tolerated when an ``llm/stream`` listener serves it."""
        try:
            return await self.llm.prepare_call(config, signal)
        except LlmError as exc:
            if exc.code == "NO_ADAPTER" and self.ctx.has_listeners(LLM_STREAM):
                return None
            raise

    # -- transactions -----------------------------------------------------------------------

    async def create(self, opts: CreateAgentOptions) -> LoopHandle:
        """The creation transaction of spec 03 §2.2; any failure rolls everything back."""
        session_id = opts.session_id or new_session_id()
        header = make_header(
            session_id,
            now_ms(),
            cwd=os.path.abspath(opts.cwd) if opts.cwd else None,
            is_seeded=bool(opts.inherited_event_count),
            delegation_depth=opts.delegation_depth,
            parent_session=opts.parent_session,
            origin=opts.origin,
            agent_preset=opts.agent_preset,
        )
        if self.sessions.get(session_id) is not None:
            raise ValueError(f'session "{session_id}" is already live')
        session = self.sessions.new(header, opts.prefix_events, inherited_event_count=opts.inherited_event_count)
        persistence: SessionPersistence | None = self.ctx.get(SESSION_PERSISTENCE)
        handle = None
        if persistence is not None:
            handle = await persistence.create(header, inherited_event_count=opts.inherited_event_count)
            persistence.bind(session, handle)
        return await self._publish(
            session, opts.agent_options, handle, opts.setup, source="startup", signal=opts.signal
        )

    async def resume(
        self,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        signal: AbortSignal | None = None,
    ) -> LoopHandle:
        """Cold resume (spec 02 §10.2): open for write, repair durably, rebuild, publish."""
        if self.sessions.get(resume_session_id) is not None:
            raise ValueError(f'session "{resume_session_id}" is already live')
        persistence: SessionPersistence = self.ctx.require(SESSION_PERSISTENCE)
        handle = await persistence.open(resume_session_id, "write")
        try:
            events = await handle.read()
            closers = tail_turn_closers(events)
            if closers:
                handle.append(closers)
                await handle.flush()
            session = self.sessions.from_stored(handle.header, events + closers)
            persistence.bind(session, handle)
        except BaseException:
            await handle.close()
            raise
        options = agent_options or AgentOptions()
        return await self._publish(session, options, handle, setup, source="resume", signal=signal)

    async def _publish(
        self,
        session: Session,
        options: AgentOptions,
        handle: SessionHandle | None,
        setup: Setup | None,
        *,
        source: str,
        signal: AbortSignal | None,
    ) -> LoopHandle:
        agent = LoopAgent(self, session, options)
        loop_handle = LoopHandle(self, agent, handle)
        entered = registered = False
        try:
            result = None
            if setup is not None:

                async def run_setup(_signal: AbortSignal) -> Any:
                    value = setup(agent.ctx, agent)
                    return await value if asyncio.iscoroutine(value) else value

                result = await agent.run_maintenance(run_setup)
            await self.sessions.enter(session)
            entered = True
            self.agents.enter(agent, loop_handle)
            registered = True
            await self.ctx.serial(AGENT_CREATED, AgentCreated(agent=agent, source=source, signal=signal), scope=agent)
            commit = getattr(result, "commit", None)
            if callable(commit):
                commit()
        except BaseException:
            agent.disposed = True
            await agent.scope.dispose()
            if registered:
                self.agents.leave(agent)
            if entered:
                self.sessions.leave(session)
            if handle is not None:
                await _abandon(handle)
            raise
        self.handles.add(loop_handle)
        return loop_handle

    async def dispose_all(self) -> None:
        for handle in list(self.handles):
            await handle.dispose()


async def _abandon(handle: SessionHandle) -> None:
    """Release a persistence handle of a rolled-back creation without writing anything new."""
    await handle.discard()


name = "agent-loop"
inject = (AGENTS, SESSIONS, SYSTEM_PROMPT, LLM)
optional = (INVARIANTS,)


def apply(ctx: Context, config: Config) -> None:
    loop = AgentLoop(ctx, config)
    ctx.provide(AGENT_LOOP, loop)
    ctx.effect(lambda: loop.dispose_all)
    registry: AgentRegistry = ctx.require(AGENTS)
    registry.set_factory(ctx, loop)
    invariants = ctx.get(INVARIANTS)
    if invariants is not None:
        from pydsh.agent.invariants import install

        invariants.register(ctx, "agent-loop", install)
    prompt = ctx.require(SYSTEM_PROMPT)
    prompt.variable(ctx, "provider", lambda agent: route_of(ctx, agent)["provider"])
    prompt.variable(ctx, "model", lambda agent: route_of(ctx, agent)["model"])
    prompt.variable(ctx, "cwd", lambda agent: str(agent.session.header.get("cwd") or os.getcwd()) if agent else None)


def route_of(ctx: Context, agent: LoopAgent | None) -> dict[str, str]:
    """The route an agent is on: its options, else its logged header, else the default route."""
    if agent is not None and agent.options.provider and agent.options.model:
        return {"provider": agent.options.provider, "model": agent.options.model}
    header = agent.session.request_header() if agent is not None else None
    if header is not None:
        return {"provider": header["config"]["provider"], "model": header["config"]["model"]}
    default = ctx.get(AGENT_DEFAULT_MODEL)
    if default is not None:
        return default.current_selection()
    return {"provider": "", "model": ""}
