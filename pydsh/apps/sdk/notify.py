"""The SDK server's notifications (spec 06 §7): every session event, status change and subagent edge of the
process, forwarded as frames through the server's one writer (plus the opt-in ``deltas`` and ``team``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import AGENT_ERROR, AGENT_STATUS, ASSISTANT_STREAM, AgentFailed, AgentStatus, AssistantStream
from pydsh.agent.keys import AGENTS
from pydsh.session.hooks import SESSION_CREATED, SESSION_EVENT
from pydsh.session.keys import SESSIONS
from pydsh.subagents.hooks import SUBAGENT_END, SubagentEnd
from pydsh.teams.errors import TeamError
from pydsh.teams.hooks import ROUTES_CHANGED
from pydsh.teams.keys import AGENT_TEAMS
from pydsh.wire.protocol import DELTA_NOTIFICATION, TEAM_NOTIFICATION

if TYPE_CHECKING:
    from pydsh.apps.stdio import FrameWriter
    from pydsh.contract.agent import Agent
    from pydsh.kernel.context import Context
    from pydsh.kernel.fiber import Disposer
    from pydsh.session.events import Event
    from pydsh.session.log import Session

log = logging.getLogger("pydsh.sdk")


DELTA_KINDS = {
    "text-delta": ("text", "text"),
    "reasoning-delta": ("reasoning", "text"),
    "tool-call-delta": ("tool-call", "argumentsDelta"),
}


class Notifier:
    """Kernel events to notification frames; ``failures`` records each session's unanswered turn failure."""

    def __init__(self, ctx: Context, out: FrameWriter, max_tokens_as_success: bool) -> None:
        self.ctx = ctx
        self.out = out
        self.max_tokens_as_success = max_tokens_as_success
        self.deltas = False
        self.team = False
        self.failures: dict[str, tuple[int, str]] = {}
        """Session id → (seq, message) of an ``agent/error`` no ``turn/end`` followed yet (``session/wait``)."""
        self.watched: set[str] = set()
        """Sessions whose failures are recorded (those the server opened)."""
        self._announced: set[str] = set()
        self._listeners: list[Disposer] = [
            ctx.on(SESSION_EVENT, self._on_session_event),
            ctx.on(SESSION_CREATED, self._on_session_created),
            ctx.on(AGENT_STATUS, self._on_status),
            ctx.on(AGENT_ERROR, self._on_error),
            ctx.on(ASSISTANT_STREAM, self._on_stream),
            ctx.on(SUBAGENT_END, self._on_subagent_end),
            ctx.on(ROUTES_CHANGED, self.send_team),
        ]

    def detach(self) -> None:
        """No frame follows (the ``shutdown`` response is the last one)."""
        for remove in self._listeners:
            remove()
        self._listeners.clear()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        try:
            self.out.send({"jsonrpc": "2.0", "method": method, "params": params})
        except ValueError:
            log.warning("dropped a %s notification JSON cannot carry", method, exc_info=True)

    def _announce(self, session: Session, parent: str | None = None) -> None:
        """``subagent.started`` once per child per process, before any other frame naming it (O2)."""
        parent = parent or session.header.get("parentSession")
        if parent and session.id not in self._announced:
            self._announced.add(session.id)
            self.notify("subagent.started", {"parentSessionId": parent, "childSessionId": session.id})

    def _on_session_event(self, session: Session, event: Event) -> None:
        self._announce(session)
        self.notify("session.event", {"sessionId": session.id, "event": event})
        if event["type"].startswith("team/"):
            self.send_team(session.id)
        if event["type"] == "turn/end":
            failure = self.failures.get(session.id)
            if failure is not None and event["seq"] >= failure[0]:
                del self.failures[session.id]

    def send_team(self, lead_id: str) -> None:
        """``pydsh.team`` on opt-in: the roster a live Lead's ``list_agents`` shows, routes included."""
        teams = self.ctx.get(AGENT_TEAMS)
        lead = self.ctx.require(AGENTS).get(lead_id)
        if not self.team or teams is None or lead is None:
            return
        membership = teams.try_membership(lead)
        if membership is None or membership.role != "lead":
            return
        try:
            members = teams.roster(lead)
        except TeamError:
            log.debug("no pydsh.team for %s: its Team failed to rebuild", lead_id)
            return
        self.notify(TEAM_NOTIFICATION, {"sessionId": lead_id, "members": members})

    def _on_session_created(self, session: Session) -> None:
        self._announce(session)

    def _on_status(self, payload: AgentStatus) -> None:
        agent: Agent = payload["agent"]
        self._announce(agent.session)
        self.notify("session.status", {"sessionId": agent.id, "status": payload["status"]})

    def _on_error(self, payload: AgentFailed) -> None:
        agent: Agent = payload["agent"]
        if agent.id in self.watched and self.ctx.require(AGENTS).get(agent.id) is agent:
            self.failures[agent.id] = (agent.session.seq, error_message(payload["error"]))

    def _on_stream(self, payload: AssistantStream) -> None:
        frame = payload["frame"]
        if not self.deltas or frame["type"] != "chunk":
            return
        chunk = frame["chunk"]
        kind = DELTA_KINDS.get(chunk.get("type"))
        if kind is None:
            return
        block_type, key = kind
        params = {"sessionId": payload["agent"].id, "turn": frame["turn"], "step": frame["step"]}
        params |= {"index": frame["index"], "blockType": block_type, "delta": chunk[key]}
        self.notify(DELTA_NOTIFICATION, params)

    def _on_subagent_end(self, payload: SubagentEnd) -> None:
        if not payload.get("local"):
            return
        child: str = payload["id"]
        live = self.ctx.require(SESSIONS).get(child)
        parent = payload.get("parent_id") or (live.header.get("parentSession") if live is not None else None)
        if live is not None:
            self._announce(live, parent)
        stop = payload["stop_reason"]
        ok = stop == "completed" or (stop == "max-tokens" and self.max_tokens_as_success)
        params = {"provider": payload["provider"], "agentId": child, "parentSessionId": parent}
        params |= {"childSessionId": child, "status": "ok" if ok else "error", "stopReason": stop}
        if payload.get("last_assistant_message"):
            params["lastAssistantMessage"] = payload["last_assistant_message"]
        self.notify("subagent.finished", params)


def error_message(exc: BaseException) -> str:
    """The ``-32603`` message of a failure: its text, else its class name."""
    return str(exc) or type(exc).__name__
