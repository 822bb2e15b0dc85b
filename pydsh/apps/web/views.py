"""What the page reads of sessions, live or stored: logs (read once per revision), summaries for the
sidebar, the projections of the session view, and statuses (spec 12 §4.1).

Nothing here makes a session live: a stored log is read through ``session_query`` and kept while its
size is unchanged, so opening a session (summary, tail, stream) reads a long log once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from pydsh.apps.web.errors import ApiError, not_found
from pydsh.apps.web.summary import SummaryFold, fold_events, workspace_id
from pydsh.session.errors import SessionError, SessionPersistenceNotFoundError
from pydsh.session.title import TITLE

if TYPE_CHECKING:
    from pydsh.apps.web.hub import WebHub
    from pydsh.session.events import Event
    from pydsh.session.log import Session

log = logging.getLogger("pydsh.web")

READ_CACHE = 2
METER_KEYS = ("tokenUsage", "contextPressure", "contextBreakdown")


class SessionViews:
    """Reads and the values derived from them, for the routes and the streams of one hub."""

    def __init__(self, hub: WebHub) -> None:
        self.hub = hub
        self.ctx = hub.ctx
        self.folds: dict[str, SummaryFold] = {}
        self._offline: dict[str, tuple[int, dict[str, Any]]] = {}
        self._reads: OrderedDict[str, tuple[int, Session]] = OrderedDict()

    # -- reading --------------------------------------------------------------------------------

    async def read(self, session_id: str) -> Session:
        """The live session, else its stored log (read only, never made live)."""
        live = self.hub.store.get(session_id)
        if live is not None:
            return live
        persistence = self.ctx.get("session_persistence")
        revision = None
        if persistence is not None:
            try:
                revision = (await persistence.stat(session_id))["revision"]
            except SessionPersistenceNotFoundError:
                raise not_found(f'Session "{session_id}"') from None
            except SessionError as exc:
                raise ApiError(409, "session_unreadable", f"Session {session_id} cannot be read: {exc}") from None
            cached = self._reads.get(session_id)
            if cached is not None and cached[0] == revision:
                self._reads.move_to_end(session_id)
                return cached[1]
        session = await self._read_stored(session_id)
        if revision is not None:
            self._reads[session_id] = (revision, session)
            while len(self._reads) > READ_CACHE:
                self._reads.popitem(last=False)
        return session

    async def _read_stored(self, session_id: str) -> Session:
        try:
            session: Session = await self.ctx.require("session_query").read(session_id)
        except SessionPersistenceNotFoundError:
            raise not_found(f'Session "{session_id}"') from None
        except SessionError as exc:
            raise ApiError(409, "session_unreadable", f"Session {session_id} cannot be read: {exc}") from None
        return session

    def status_of(self, session_id: str) -> str:
        agent = self.hub.agents.get(session_id)
        return "offline" if agent is None else ("running" if agent.status == "running" else "idle")

    def lineage(self, session_id: str) -> list[str]:
        """``session_id`` and its live ancestors, nearest first."""
        out = [session_id]
        session = self.hub.store.get(session_id)
        while session is not None and session.header.get("origin") == "subagent" and len(out) < 100:
            parent = str(session.header.get("parentSession"))
            out.append(parent)
            session = self.hub.store.get(parent)
        return out

    # -- summaries --------------------------------------------------------------------------------

    def fold(self, session: Session) -> SummaryFold:
        fold = self.folds.get(session.id)
        if fold is None or fold.last_seq != session.seq:
            fold = fold_events(session.events)
            self.folds[session.id] = fold
        return fold

    def advance(self, session: Session, event: Event) -> None:
        """Keep a live session's fold current with one new event."""
        fold = self.folds.get(session.id)
        if fold is None:
            self.fold(session)
        elif event["seq"] == fold.last_seq + 1:
            fold.apply(event)
        else:
            self.folds[session.id] = fold_events(session.events)

    def title_of(self, session: Session) -> str:
        state = session.fold(TITLE)
        if state is not None:
            return str(state["title"])
        titles = self.ctx.get("session_title")
        found = titles.fallback_for(session.events) if titles is not None else None
        return str(found[0]) if found is not None else "New session"

    def summary(self, session: Session, fold: SummaryFold | None = None) -> dict[str, Any]:
        """``SessionSummary`` of a live or stored session."""
        header = session.header
        fold = fold or self.fold(session)
        pending = self.hub.waiting.pending(session.id)
        cwd = str(header.get("cwd") or "")
        out: dict[str, Any] = {
            "sessionId": session.id,
            "cwd": cwd,
            "workspaceId": workspace_id(cwd),
            "title": self.title_of(session),
            "createdAt": header.get("createdAt"),
            "updatedAt": fold.updated_at or header.get("createdAt"),
            "status": self.status_of(session.id),
            "waiting": {"approvals": len(pending["approvals"]), "questions": len(pending["questions"])},
            "queued": len(pending["queued"]),
        }
        if header.get("agentPreset"):
            out["agentPreset"] = header["agentPreset"]
        out["permissionPreset"] = self.permission_of(session, fold)
        out["model"] = fold.model or self.default_route()
        out["stats"] = fold.stats()
        if header.get("parentSession"):
            out["parentSessionId"] = header["parentSession"]
        return out

    def permission_of(self, session: Session, fold: SummaryFold) -> str:
        permissions = self.ctx.get("permissions")
        agent = self.hub.agents.get(session.id)
        if permissions is not None and agent is not None:
            return str(permissions.preset(agent))
        if fold.permission_preset:
            return fold.permission_preset
        return str(permissions.default_preset) if permissions is not None else "workspace-write"

    def default_route(self) -> dict[str, Any]:
        default = self.ctx.get("agent_default_model")
        return dict(default.current_selection()) if default is not None else {"provider": "", "model": ""}

    async def list_summaries(self) -> list[dict[str, Any]]:
        """Root sessions, newest first by last event; stored logs are folded once per revision."""
        rows: dict[str, dict[str, Any]] = {}
        persistence = self.ctx.get("session_persistence")
        if persistence is not None:
            for item in await persistence.list():
                header = item["header"]
                if header.get("origin") == "subagent" or self.hub.store.get(header["id"]) is not None:
                    continue
                cached = self._offline.get(header["id"])
                if cached is None or cached[0] != item["revision"]:
                    try:
                        session = await self.read(header["id"])
                    except ApiError:
                        continue
                    cached = (item["revision"], self.summary(session, fold_events(session.events)))
                    self._offline[header["id"]] = cached
                rows[header["id"]] = dict(cached[1], status="offline")
        for session in self.hub.store.live():
            if session.header.get("origin") != "subagent":
                rows[session.id] = self.summary(session)
        return sorted(rows.values(), key=lambda r: (-int(r["updatedAt"] or 0), r["sessionId"]))

    # -- the session view -----------------------------------------------------------------------

    def projections(self, session: Session) -> dict[str, Any]:
        """The projection values of ``GET /api/sessions/{id}``."""
        fold = self.fold(session)
        registry = self.ctx.get("session_projections")
        meter = registry.snapshot(session, METER_KEYS)["values"] if registry is not None else {}
        source = (session.fold(TITLE) or {}).get("source", {"kind": "fallback"})
        return {
            "title": {"title": self.title_of(session), "source": source},
            "todos": fold.todos,
            "tokenUsage": meter.get("tokenUsage"),
            "contextPressure": meter.get("contextPressure"),
            "contextBreakdown": meter.get("contextBreakdown"),
            "sessionStats": fold.stats(),
            "modelSelection": fold.model or self.default_route(),
            "permissionPreset": self.permission_of(session, fold),
        }

    async def compaction_budget(self, session: Session) -> dict[str, int] | None:
        """``{thresholdTokens, contextWindow}`` of the session's compaction trigger (F39's warning), if any."""
        agent = self.hub.agents.get(session.id)
        roster = self.ctx.get("agent_presets")
        engine = roster.service_for(agent, "compaction") if roster is not None and agent is not None else None
        engine = engine or self.ctx.get("compaction")
        budgets = getattr(engine, "budgets", None)
        target = session.request_header()
        if budgets is None or target is None:
            return None
        config = target["config"]
        try:
            found = await budgets(session, config["provider"], config["model"])
        except Exception:
            log.debug("no compaction budget for %s", session.id, exc_info=True)
            return None
        return {"thresholdTokens": int(found.threshold), "contextWindow": int(found.context_window)}
