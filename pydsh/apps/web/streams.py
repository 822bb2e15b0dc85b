"""The page's live streams: the kernel's events fanned out to each open session stream and to the index
stream, with projection, index, agent-tree and Team updates coalesced on short timers (spec 12 §4.3)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import AGENT_DISPOSED, AGENT_STATUS, ASSISTANT_STREAM, AgentRef, AgentStatus, AssistantStream
from pydsh.apps.web import memory
from pydsh.apps.web.elide import for_page
from pydsh.apps.web.fanout import Newest, Subscriber, Topic
from pydsh.apps.web.messages import DeliveryFeed
from pydsh.apps.web.team import lead_of, team_view
from pydsh.apps.web.views import METER_KEYS
from pydsh.session.hooks import SESSION_EVENT
from pydsh.session.keys import SESSION_PROJECTIONS
from pydsh.teams.keys import AGENT_TEAMS

if TYPE_CHECKING:
    from pydsh.apps.web.hub import WebHub
    from pydsh.contract.agent import Agent
    from pydsh.kernel.fiber import Disposer
    from pydsh.session.events import Event
    from pydsh.session.log import Session

log = logging.getLogger("pydsh.web")

INDEX = ""
PROJECTION_INTERVAL_S = 0.1
INDEX_INTERVAL_S = 0.25
TRIM_DELAY_S = 1.0
"""After a turn ends or a long read is dropped, freed memory goes back to the system this much later."""
RELEASE_DELAY_S = 10.0
"""How long a session's memory outlives its last stream (or, unwatched, its last turn): a stored session's
full read, a live root agent that is idle. Reading a 10,000-event log again, and letting the old read go,
took a reopened page about twice as long as keeping it."""
INDEX_EVENTS = frozenset({"turn/end", "turn/start", "session/title", "agent/inbox/spliced", "approval/decided"})
PENDING_EVENTS = frozenset({"agent/inbox/spliced", "approval/asked", "approval/decided"})
LIVE_KEYS = {"title", "todos", "goal", "sessionStats", "modelSelection", "permissionPreset", "schedules"}
SHOWN_CHUNKS = frozenset({"text-delta", "reasoning-delta"})
"""The stream chunks the page draws live; the others (tool-call deltas, block and usage marks) reach it in the
committed events, so they are neither sent nor kept: a 1,500-call turn sent thousands of frames nobody read."""


class Streams:
    """Session and index topics of one hub, fed by the kernel's events on the hub's loop."""

    def __init__(self, hub: WebHub) -> None:
        self.hub = hub
        self.sessions_topic = Topic()
        self.index_topic = Topic()
        self.inflight: dict[str, list[dict[str, Any]]] = {}
        self._dirty_projection: dict[str, set[str]] = {}
        self._sent_projection: dict[str, dict[str, Any]] = {}
        """The last value sent of each projection key of each live session: unchanged values are not sent again."""
        self._dirty_index: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._agents_builds = Newest()
        self.deliveries = DeliveryFeed(hub)

    def listen(self) -> list[Disposer]:
        """Subscribe to the kernel's events; the disposers of those subscriptions."""
        ctx = self.hub.ctx
        listeners = [
            ctx.on(SESSION_EVENT, self._on_session_event),
            ctx.on(AGENT_STATUS, self._on_status),
            ctx.on(ASSISTANT_STREAM, self._on_stream),
            ctx.on(AGENT_DISPOSED, self._on_disposed),
        ]
        if ctx.get(AGENT_TEAMS) is not None:
            from pydsh.teams.hooks import ROUTES_CHANGED

            listeners.append(ctx.on(ROUTES_CHANGED, self._mark_team))
        projections = ctx.get(SESSION_PROJECTIONS)
        if projections is not None:
            listeners.append(projections.on_changed(ctx, self._on_projection))
        return listeners

    def close(self) -> None:
        """Stop every timer and end every open stream."""
        for timer in self._timers.values():
            timer.cancel()
        self.deliveries.close()
        self.sessions_topic.close_all()
        self.index_topic.close_all()

    # -- subscribers ------------------------------------------------------------------------------

    def subscribe(self, session_id: str) -> tuple[Subscriber, list[Event] | None, list[dict[str, Any]]]:
        """Register a stream before reading the tail (rule 1): the live events and in-flight frames now,
        or ``None`` events for a stored session (the caller reads them, deduplicating by seq)."""
        sub = Subscriber()
        self.sessions_topic.add(session_id, sub)
        live = self.hub.store.get(session_id)
        events = list(live.events) if live is not None else None
        return sub, events, list(self.inflight.get(session_id, ()))

    def unsubscribe(self, session_id: str, sub: Subscriber) -> None:
        """End a stream; once the last one of a stored session has been closed for :data:`RELEASE_DELAY_S`,
        its full read goes (a page reloaded, or a user flipping back to the session, finds it kept)."""
        self.sessions_topic.remove(session_id, sub)
        self._release_soon(session_id)

    def _release_soon(self, session_id: str) -> None:
        """Let go of the session's memory :data:`RELEASE_DELAY_S` from now, unless a stream watches it then."""
        if not self.sessions_topic.has(session_id):
            self._later(f"release:{session_id}", RELEASE_DELAY_S, lambda: self._release(session_id))

    def _release(self, session_id: str) -> None:
        """Let go of what an unwatched session holds: a stored one's full read, a live root agent that is
        idle with nothing ahead (its log is on disk; the next prompt or page resumes it)."""
        if self.sessions_topic.has(session_id):
            return
        if self.hub.views.release(session_id):
            self.trim_soon()
        agent = self.hub.host.agent(session_id)
        if agent is not None and agent.releasable and not self.hub.stopping:
            asyncio.ensure_future(agent.close()).add_done_callback(self._closed)

    def _closed(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.warning("letting an idle session go failed", exc_info=task.exception())
        self._later("collect", TRIM_DELAY_S, memory.collect)

    def trim_soon(self) -> None:
        """Hand freed memory back to the system shortly (once for a burst of releases)."""
        self._later("trim", TRIM_DELAY_S, memory.trim)

    def subscribe_index(self) -> Subscriber:
        sub = Subscriber()
        self.index_topic.add(INDEX, sub)
        return sub

    def unsubscribe_index(self, sub: Subscriber) -> None:
        self.index_topic.remove(INDEX, sub)

    # -- kernel listeners -------------------------------------------------------------------------

    def _on_session_event(self, session: Session, event: Event) -> None:
        try:
            self.hub.views.advance(session, event)
            self.sessions_topic.publish(session.id, ("session-event", for_page(event), event["seq"]))
            etype = event["type"]
            if etype in PENDING_EVENTS:
                self.pending_changed(session.id)
            if etype in INDEX_EVENTS:
                self.mark_index(session.id)
            self._mark_projection(session.id, LIVE_KEYS)
            if session.header.get("origin") == "subagent" or etype == "subagent/catalog":
                self._mark_agents(session)
            if etype.startswith("team/"):
                self._mark_team(session.id)
            if etype in ("tool/result", "agent/inbox/spliced"):
                self.deliveries.changed(session.id, event)
        except Exception:
            log.warning("web fan-out of a session event failed", exc_info=True)

    def _on_status(self, payload: AgentStatus) -> None:
        agent: Agent = payload["agent"]
        status = "running" if payload["status"] == "running" else "idle"
        self.sessions_topic.publish(agent.id, ("status", {"status": status}, None))
        self.mark_index(agent.id)
        if status == "idle":
            self.trim_soon()  # a turn's transient encodings (a 5 MB answer's, several times over) are freed
            self._release_soon(agent.id)
        self.deliveries.target_status(agent.id)
        if agent.session.header.get("origin") == "subagent":
            self._mark_agents(agent.session)
            lead = lead_of(self.hub, agent.id)
            if lead is not None:
                self._mark_team(lead)

    def _on_stream(self, payload: AssistantStream) -> None:
        frame = payload["frame"]
        sid = payload["agent"].id
        if frame["type"] == "chunk" and frame["chunk"].get("type") not in SHOWN_CHUNKS:
            return
        if frame["type"] == "start":
            self.inflight[sid] = [frame]
        elif frame["type"] == "end":
            self.inflight.pop(sid, None)
        else:
            self.inflight.setdefault(sid, []).append(frame)
        self.sessions_topic.publish(sid, ("assistant-stream", frame, None))

    def _on_disposed(self, payload: AgentRef) -> None:
        """Forget what was kept for a session that left memory (its log is read again if asked)."""
        agent: Agent = payload["agent"]
        header = agent.session.header
        if self.index_topic.has(INDEX) and header.get("origin") != "subagent" and not self.hub.stopping:
            self.index_topic.publish(INDEX, ("session", self.hub.views.summary(agent.session), None))
        self.hub.views.folds.pop(agent.id, None)
        self.inflight.pop(agent.id, None)
        self._sent_projection.pop(agent.id, None)

    def _on_projection(self, session: Session, key: str, view: Any) -> None:
        if key in METER_KEYS:
            self._mark_projection(session.id, {key})

    def pending_changed(self, session_id: str) -> None:
        """Send a session's ``Pending`` value now and mark its summary for the index."""
        self.sessions_topic.publish(session_id, ("pending", self.hub.waiting.pending(session_id), None))
        self.mark_index(session_id)

    # -- coalescing -------------------------------------------------------------------------------

    def _later(self, key: str, delay: float, callback: Callable[[], None]) -> None:
        if key in self._timers or self.hub.stopping:
            return

        def run() -> None:
            self._timers.pop(key, None)
            try:
                callback()
            except Exception:
                log.warning("web stream update %s failed", key, exc_info=True)

        self._timers[key] = asyncio.get_running_loop().call_later(delay, run)

    def _mark_projection(self, session_id: str, keys: set[str]) -> None:
        if not self.sessions_topic.has(session_id):
            return
        self._dirty_projection.setdefault(session_id, set()).update(keys)
        self._later(f"projection:{session_id}", PROJECTION_INTERVAL_S, lambda: self._flush_projection(session_id))

    def _flush_projection(self, session_id: str) -> None:
        keys = self._dirty_projection.pop(session_id, set())
        session = self.hub.store.get(session_id)
        if session is None or not keys:
            return
        values = self.hub.views.projections(session)
        sent = self._sent_projection.setdefault(session_id, {})
        for key in sorted(keys):
            if key in sent and sent[key] == values[key]:
                continue
            sent[key] = values[key]
            frame = {"key": key, "value": values[key], "asOfSeq": session.seq}
            self.sessions_topic.publish(session_id, ("projection", frame, None))

    def mark_index(self, session_id: str) -> None:
        """Send ``session_id``'s summary on the index stream soon (coalesced)."""
        if not self.index_topic.has(INDEX):
            return
        self._dirty_index.add(session_id)
        self._later("index", INDEX_INTERVAL_S, self._flush_index)

    def _flush_index(self) -> None:
        dirty, self._dirty_index = self._dirty_index, set()
        for sid in sorted(dirty):
            session = self.hub.store.get(sid)
            if session is None or session.header.get("origin") == "subagent":
                continue
            self.index_topic.publish(INDEX, ("session", self.hub.views.summary(session), None))

    def _mark_agents(self, session: Session) -> None:
        root = self.hub.views.lineage(session.id)[-1]
        if not self.sessions_topic.has(root):
            return
        self._later(f"agents:{root}", PROJECTION_INTERVAL_S, lambda: self._spawn_agents(root))

    def _mark_team(self, lead_id: str) -> None:
        if self.sessions_topic.has(lead_id):
            self._later(f"team:{lead_id}", PROJECTION_INTERVAL_S, lambda: self._send_team(lead_id))

    def _send_team(self, lead_id: str) -> None:
        team = team_view(self.hub, lead_id)
        if team is not None:
            self.sessions_topic.publish(lead_id, ("team", team, None))

    def _spawn_agents(self, root: str) -> None:
        build = self._agents_builds.take(root)

        async def send() -> None:
            from pydsh.apps.web.agents import agent_tree

            tree = await agent_tree(self.hub, root)
            if self._agents_builds.newest(root, build):
                self.sessions_topic.publish(root, ("agents", {"root": tree}, None))

        task = asyncio.ensure_future(send())
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("web agents update failed", exc_info=task.exception())
