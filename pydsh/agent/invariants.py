"""Invariant companions of the agent loop (spec 03 §12): model-visible means logged, status alternates, and
the loop never feeds itself: a step follows a tool-free answer only for input from outside the step."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from pydsh.agent.hooks import AGENT_STATUS, INBOX_INSERTED, STEP_PREPARING, AgentStatus, InboxChange, StepPreparing
from pydsh.agent.keys import AGENTS
from pydsh.agent.request import CONFIG_KEYS
from pydsh.kernel.context import Context
from pydsh.llm.hooks import LLM_STREAM
from pydsh.session.events import FrozenDict, FrozenList
from pydsh.session.hooks import SESSION_DISPOSED, SESSION_EVENT
from pydsh.session.keys import SESSIONS
from pydsh.session.log import SessionStore

Fail = Callable[[str], NoReturn]


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _frozen(value: Any) -> bool:
    """Whether every dict and list inside ``value`` refuses mutation (the request is immutable, 03 §7.2)."""
    if isinstance(value, dict):
        return isinstance(value, FrozenDict) and all(_frozen(v) for v in value.values())
    if isinstance(value, list):
        return isinstance(value, FrozenList) and all(_frozen(v) for v in value)
    return True


def install(ctx: Context, fail: Fail) -> None:
    """Check every loop-built request against the log, and every status change."""
    sessions: SessionStore = ctx.require(SESSIONS)
    last_status: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    async def request_is_logged(options: dict[str, Any], nxt: Callable[[], Awaitable[Any]]) -> Any:
        if options.get("loop_built"):
            if not _frozen(options):
                fail(f"request for session {options.get('sessionId')!r} is not frozen")
            session = sessions.get(options.get("sessionId") or "")
            if session is None:
                fail(f"request for session {options.get('sessionId')!r}, which is not live")
            header = session.request_header()
            if session.open_step is None or header is None:
                fail(f"session {session.id}: request outside an open step or before any request/header")
            if _canon(options["messages"]) != _canon(session.derive_messages()):
                fail(f"session {session.id}: request messages differ from derive_messages()")
            config = header["config"]
            for key in CONFIG_KEYS:
                if options.get(key) != config.get(key):
                    fail(f"session {session.id}: request {key} {options.get(key)!r} differs from the header")
            if _canon(options.get("tools") or []) != _canon(header.get("tools") or []):
                fail(f"session {session.id}: request tools differ from the logged header")
        return await nxt()

    def status_alternates(payload: AgentStatus) -> None:
        agent = payload["agent"]
        if last_status.get(agent) == payload["status"]:
            fail(f"agent {agent.id} emitted status {payload['status']!r} twice in a row")
        last_status[agent] = payload["status"]

    ctx.on(LLM_STREAM, request_is_logged, name="invariant:request-logged", global_=True)
    ctx.on(AGENT_STATUS, status_alternates, global_=True)
    install_progress(ctx, fail)


def install_progress(ctx: Context, fail: Fail) -> None:
    """The loop steps only on new input from outside: after a step whose answer called no tools, the next
    step of the turn must claim input someone other than the agent's own step preparation queued.

    Input an agent queues for itself while preparing a step (in its own task, between
    ``agent/step-preparing`` and the model call: pre-step listeners, prompt assembly, runtime contexts)
    rides along with the next step another cause starts; were it the only cause, every step would queue
    the input of the next and the agent would call the model forever.
    """
    agents = ctx.require(AGENTS)
    preparing: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
    self_fed: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
    called_tools: dict[str, bool] = {}

    def step_preparing(payload: StepPreparing) -> None:
        agent, step, claimed = payload["agent"], payload["step"], payload["claimed"]
        fed = self_fed.get(agent, set())
        if step > 1 and not called_tools.get(agent.id) and claimed and all(m["id"] in fed for m in claimed):
            fail(
                f"agent {agent.id} took step {step} of turn {payload['turn']} only on input it queued for itself "
                f"while preparing step {step - 1} (no new input from outside: the loop would never stop)"
            )
        self_fed[agent] = set()
        preparing[agent] = True

    def inserted(payload: InboxChange) -> None:
        agent = payload["agent"]
        if preparing.get(agent) and asyncio.current_task() is getattr(agent, "_activity", None):
            self_fed.setdefault(agent, set()).add(payload["message"]["id"])

    async def model_called(options: dict[str, Any], nxt: Callable[[], Awaitable[Any]]) -> Any:
        agent = agents.get(options.get("sessionId") or "")
        if agent is not None:
            preparing[agent] = False
        return await nxt()

    def step_events(session: Any, event: dict[str, Any]) -> None:
        if event["type"] == "step/start":
            called_tools[session.id] = False
        elif event["type"] == "tool/call":
            called_tools[session.id] = True

    def forget(session: Any) -> None:
        called_tools.pop(session.id, None)

    ctx.on(STEP_PREPARING, step_preparing, global_=True)
    ctx.on(INBOX_INSERTED, inserted, global_=True)
    ctx.on(LLM_STREAM, model_called, name="invariant:model-called", global_=True)
    ctx.on(SESSION_EVENT, step_events, global_=True)
    ctx.on(SESSION_DISPOSED, forget, global_=True)
