"""Invariant companions of the agent loop (spec 03 §12): model-visible means logged, status alternates."""

from __future__ import annotations

import json
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from pydsh.agent.request import CONFIG_KEYS
from pydsh.kernel.context import Context
from pydsh.session.events import FrozenDict, FrozenList
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
    sessions: SessionStore = ctx.require("sessions")
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

    def status_alternates(payload: dict[str, Any]) -> None:
        agent = payload["agent"]
        if last_status.get(agent) == payload["status"]:
            fail(f"agent {agent.id} emitted status {payload['status']!r} twice in a row")
        last_status[agent] = payload["status"]

    ctx.on("llm/stream", request_is_logged, prepend=True, global_=True)
    ctx.on("agent/status", status_alternates, global_=True)
