"""What the page reads of sessions, live or stored: logs (read once per revision), summaries for the
sidebar, the projections of the session view, and statuses (spec 12 §4.1).

Nothing here makes a session live: a stored log is read through ``session_query`` and kept while its
size is unchanged, so opening a session (summary, tail, stream) reads a long log once; the read goes when the
last stream of the session closes (:meth:`SessionViews.release`), or when newer reads push it out. Lists of
sessions are pages of the session index (stored sessions, no log read) merged with the live ones.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from pydsh.agent.keys import AGENT_DEFAULT_MODEL, AGENT_PRESETS
from pydsh.apps.web.digest import Digest, digest
from pydsh.apps.web.errors import ApiError, not_found
from pydsh.apps.web.summary import SessionFold, fold_events, workspace_id
from pydsh.compaction.keys import COMPACTION
from pydsh.policy.keys import PERMISSIONS
from pydsh.schedules.keys import SCHEDULES
from pydsh.session.errors import SessionError, SessionPersistenceNotFoundError
from pydsh.session.keys import SESSION_INDEX, SESSION_PERSISTENCE, SESSION_PROJECTIONS, SESSION_QUERY, SESSION_TITLE
from pydsh.session.summary import SummaryFold
from pydsh.session.tail import tail
from pydsh.session.title import TITLE

if TYPE_CHECKING:
    from pathlib import Path

    from pydsh.apps.web.hub import WebHub
    from pydsh.session.events import Event
    from pydsh.session.index import IndexEntry, SessionIndex
    from pydsh.session.log import Session

log = logging.getLogger("pydsh.web")

READ_CACHE = 2
METER_KEYS = ("tokenUsage", "contextPressure", "contextBreakdown")
UNTITLED = "New session"
WORKSPACE_FIRST = 5
"""Sessions the sidebar shows under each workspace before "Show N more" (F3)."""
CURSOR = re.compile(r"([0-9]{1,18})\.(.*)", re.DOTALL)


class SessionViews:
    """Reads and the values derived from them, for the routes and the streams of one hub."""

    def __init__(self, hub: WebHub) -> None:
        self.hub = hub
        self.ctx = hub.ctx
        self.folds: dict[str, SessionFold] = {}
        self._reads: OrderedDict[str, tuple[int, Session]] = OrderedDict()
        self._reading: dict[tuple[str, int | None], asyncio.Future[Session]] = {}
        """Reads under way: the page asks for a session's detail, its tail and its stream at once, and they
        share one read of the log instead of parsing it three times side by side."""

    # -- reading --------------------------------------------------------------------------------

    async def read(self, session_id: str) -> Session:
        """The live session, else its stored log (read only, never made live). A stored read is kept only while
        a stream watches the session: a read finishing after the last stream closed would stay for good."""
        live = self.hub.store.get(session_id)
        if live is not None:
            return live
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        revision = None
        if persistence is not None:
            try:
                revision = (await persistence.stat(session_id))["revision"]
            except SessionPersistenceNotFoundError:
                raise not_found(f'Session "{session_id}"') from None
            except SessionError as exc:
                raise ApiError(409, "session_unreadable", f"Session {session_id} cannot be read: {exc}") from None
            cached = self._cached(session_id, revision)
            if cached is not None:
                self._reads.move_to_end(session_id)
                return cached
        key = (session_id, revision)
        pending = self._reading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Session] = asyncio.get_running_loop().create_future()
        self._reading[key] = future
        try:
            session = await self._read_stored(session_id)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so a read nobody else waited for logs nothing
            raise
        finally:
            del self._reading[key]
        future.set_result(session)
        if revision is not None and self.hub.streams.sessions_topic.has(session_id):
            self._reads[session_id] = (revision, session)
            while len(self._reads) > READ_CACHE:
                dropped, _ = self._reads.popitem(last=False)
                if self.hub.store.get(dropped) is None:
                    self.folds.pop(dropped, None)  # a stored session's fold goes with its read
        return session

    def release(self, session_id: str) -> bool:
        """Drop the full read of a stored session nobody watches any more (and its fold): a 10,000-event log
        holds tens of megabytes, and the next open reads it again. Whether something was dropped."""
        if self.hub.store.get(session_id) is not None or self._reads.pop(session_id, None) is None:
            return False
        self.folds.pop(session_id, None)
        return True

    def kept(self) -> list[str]:
        """The stored sessions whose full read is kept, least recently used first."""
        return list(self._reads)

    def _cached(self, session_id: str, revision: int) -> Session | None:
        """The full read of a stored session kept for this revision of its log, if any."""
        cached = self._reads.get(session_id)
        return cached[1] if cached is not None and cached[0] == revision else None

    async def _unread(self, session_id: str) -> Path | None:
        """The log file of a stored session that has no full read kept for its current revision (``None``
        when it is live, read already, or not stored as a file)."""
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        log_file = getattr(persistence, "log_file", None)
        if self.hub.store.get(session_id) is not None or persistence is None or log_file is None:
            return None
        try:
            revision = (await persistence.stat(session_id))["revision"]
        except SessionError:
            return None  # the full read says what is wrong
        if self._cached(session_id, revision) is not None or (session_id, revision) in self._reading:
            return None
        path: Path | None = await asyncio.to_thread(log_file, session_id)
        return path

    async def glance(self, session_id: str) -> Session | Digest:
        """The live session or a kept read, else a digest of the stored log, which parses only what the
        session view shows (its first open needs no full read); else the full read."""
        path = await self._unread(session_id)
        titles = self.ctx.get(SESSION_TITLE)
        fallback = titles.fallback_for if titles is not None else None
        found = await asyncio.to_thread(digest, path, session_id, fallback) if path is not None else None
        return found if found is not None else await self.read(session_id)

    async def tail(self, session_id: str, turns: int, least: int) -> tuple[list[Event], int, int] | None:
        """``(events, index of the first, last seq)`` of the last turns of a stored session not read yet, from
        its last lines alone; ``None``: take them from :meth:`read`."""
        path = await self._unread(session_id)
        return await asyncio.to_thread(tail, path, turns, least) if path is not None else None

    async def _read_stored(self, session_id: str) -> Session:
        try:
            session: Session = await self.ctx.require(SESSION_QUERY).read(session_id)
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

    def fold(self, session: Session | Digest) -> SessionFold:
        if isinstance(session, Digest):
            return session.fold
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

    def title_of(self, session: Session | Digest) -> str:
        if isinstance(session, Digest):
            return session.fold.title_text() or UNTITLED
        state = session.fold(TITLE)
        if state is not None:
            return str(state["title"])
        titles = self.ctx.get(SESSION_TITLE)
        return (titles.title_of(session) if titles is not None else None) or UNTITLED

    def summary(self, session: Session | Digest, fold: SessionFold | None = None) -> dict[str, Any]:
        """``SessionSummary`` of a live or stored session (or a stored one's digest)."""
        return self._summary(session.id, session.header, self.title_of(session), fold or self.fold(session), session)

    def stored_summary(self, entry: IndexEntry) -> dict[str, Any]:
        """``SessionSummary`` of a stored session from its session-index entry (no log is read)."""
        fold = entry.fold or SummaryFold()
        summary = self._summary(entry.id, entry.header, fold.title_text() or UNTITLED, fold)
        summary["updatedAt"] = entry.updated_at
        return summary

    def _summary(
        self,
        sid: str,
        header: dict[str, Any],
        title: str,
        fold: SummaryFold,
        session: Session | Digest | None = None,
    ) -> dict[str, Any]:
        """``SessionSummary`` from a header, a title and a summary fold, with this process's live state (and the
        prompts an offline session's log keeps queued, when its log is at hand)."""
        pending = self.hub.waiting.pending(sid, session)
        offline = session is None and self.status_of(sid) == "offline"
        cwd = str(header.get("cwd") or "")
        out: dict[str, Any] = {
            "sessionId": sid,
            "cwd": cwd,
            "workspaceId": workspace_id(cwd),
            "title": title,
            "createdAt": header.get("createdAt"),
            "updatedAt": fold.updated_at or header.get("createdAt"),
            "status": self.status_of(sid),
            "waiting": {"approvals": len(pending["approvals"]), "questions": len(pending["questions"])},
            "queued": fold.queued() if offline else len(pending["queued"]),
        }
        if header.get("agentPreset"):
            out["agentPreset"] = header["agentPreset"]
        out["permissionPreset"] = self.permission_of(sid, fold)
        out["model"] = fold.model or self.default_route()
        out["stats"] = fold.stats()
        if header.get("parentSession"):
            out["parentSessionId"] = header["parentSession"]
        return out

    def permission_of(self, session_id: str, fold: SummaryFold) -> str:
        """The live agent's preset, else the last logged one, else the default."""
        permissions = self.ctx.get(PERMISSIONS)
        agent = self.hub.agents.get(session_id)
        if permissions is not None and agent is not None:
            return str(permissions.preset(agent))
        if fold.permission_preset:
            return fold.permission_preset
        return str(permissions.default_preset) if permissions is not None else "workspace-write"

    def default_route(self) -> dict[str, Any]:
        default = self.ctx.get(AGENT_DEFAULT_MODEL)
        return dict(default.current_selection()) if default is not None else {"provider": "", "model": ""}

    # -- lists ----------------------------------------------------------------------------------

    @property
    def index(self) -> SessionIndex:
        """The session index, which the ``web-app`` row injects."""
        index: SessionIndex = self.ctx.require(SESSION_INDEX)
        return index

    def _live_roots(self) -> list[Session]:
        """Live sessions that are listed (not members of a tree of agents)."""
        return [s for s in self.hub.store.live() if s.header.get("origin") != "subagent"]

    async def page(
        self, limit: int, cursor: str | None, workspace: str | None, query: str, *, refresh: bool = True
    ) -> dict[str, Any]:
        """``{sessions, nextCursor?}``: root sessions newest first by last event, after ``cursor`` (the
        ``<updatedAt>.<sessionId>`` of the page before's last row), in ``workspace`` (id or path), whose
        title contains ``query`` in any case. Stored ones come from the session index, live ones from memory."""
        after = _cursor_key(cursor)
        cwd = await self._workspace_path(workspace) if workspace else None
        live = self._live_roots()
        rows = [
            row
            for row in map(self.summary, live)
            if (cwd is None or row["cwd"] == cwd)
            and query in row["title"].lower()
            and (after is None or _key(row) > (-after[0], after[1]))
        ]
        exclude = frozenset(s.id for s in live)
        entries, more = await self.index.page(
            limit, after=after, cwd=cwd, title=query, untitled=UNTITLED, exclude=exclude, refresh=refresh
        )
        rows = sorted(rows + [self.stored_summary(e) for e in entries], key=_key)
        page: dict[str, Any] = {"sessions": rows[:limit]}
        if more or len(rows) > limit:
            last = rows[limit - 1]
            page["nextCursor"] = f"{int(last['updatedAt'] or 0)}.{last['sessionId']}"
        return page

    async def firsts(self, workspaces: list[dict[str, Any]], shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The newest sessions of each workspace that ``shown`` (the first page) leaves with fewer than the
        sidebar's first five, so every workspace opens with its own (the index was just refreshed)."""
        ids = {row["sessionId"] for row in shown}
        extra: list[dict[str, Any]] = []
        for workspace in workspaces:
            have = sum(row["cwd"] == workspace["path"] for row in shown)
            if have >= min(WORKSPACE_FIRST, workspace["sessionCount"]):
                continue
            page = await self.page(WORKSPACE_FIRST, None, workspace["path"], "", refresh=False)
            extra += [row for row in page["sessions"] if row["sessionId"] not in ids]
        return extra

    async def workspace_counts(self, *, refresh: bool = True) -> dict[str, int]:
        """Root sessions per working directory, folders with the newest sessions first (live ones counted);
        ``refresh=False`` right after a page, which refreshed the index."""
        counts = await self.index.workspaces(refresh=refresh)
        live = self._live_roots()
        stored = await self.index.known([s.id for s in live])
        for session in live:
            if session.id not in stored:
                cwd = str(session.header.get("cwd") or "")
                counts[cwd] = counts.get(cwd, 0) + 1
        return counts

    async def _workspace_path(self, workspace: str) -> str:
        """The folder of a workspace id, else ``workspace`` itself taken as a path."""
        stored = await self.index.workspaces(refresh=False)
        folders = [*stored, *(str(s.header.get("cwd") or "") for s in self._live_roots())]
        return next((c for c in folders if workspace_id(c) == workspace), workspace)

    # -- the session view -----------------------------------------------------------------------

    def projections(self, session: Session | Digest) -> dict[str, Any]:
        """The projection values of ``GET /api/sessions/{id}``; a digest has no meter values (they fold every
        event), which :data:`METER_KEYS` names as deferred."""
        fold = self.fold(session)
        registry = self.ctx.get(SESSION_PROJECTIONS)
        meter: dict[str, Any] = {}
        if isinstance(session, Digest):
            title = fold.title
        else:
            title = session.fold(TITLE)
            meter = registry.snapshot(session, METER_KEYS)["values"] if registry is not None else {}
        source = (title or {}).get("source", {"kind": "fallback"})
        return {
            "title": {"title": self.title_of(session), "source": source},
            "todos": fold.todos,
            "goal": fold.goal.view(),
            "tokenUsage": meter.get("tokenUsage"),
            "contextPressure": meter.get("contextPressure"),
            "contextBreakdown": meter.get("contextBreakdown"),
            "sessionStats": fold.stats(),
            "modelSelection": fold.model or self.default_route(),
            "permissionPreset": self.permission_of(session.id, fold),
            "schedules": self.schedules_of(session),
        }

    def schedules_of(self, session: Session | Digest) -> list[dict[str, Any]]:
        """A live session's active reminders (a stored one has none armed until it is opened)."""
        service = self.ctx.get(SCHEDULES)
        return [] if service is None or isinstance(session, Digest) else service.views(session)

    async def compaction_budget(self, session: Session | Digest) -> dict[str, int] | None:
        """``{thresholdTokens, contextWindow}`` of the session's compaction trigger (F39's warning), if any."""
        agent = self.hub.agents.get(session.id)
        roster = self.ctx.get(AGENT_PRESETS)
        engine = roster.service_for(agent, COMPACTION) if roster is not None and agent is not None else None
        engine = engine or self.ctx.get(COMPACTION)
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


def _key(row: dict[str, Any]) -> tuple[int, str]:
    """Sort key of a summary: newest last event first, then id."""
    return (-int(row["updatedAt"] or 0), str(row["sessionId"]))


def _cursor_key(cursor: str | None) -> tuple[int, str] | None:
    """``(updatedAt, sessionId)`` of a cursor; anything else starts from the top (like other odd query values)."""
    match = CURSOR.fullmatch(cursor or "")
    return (int(match[1]), match[2]) if match else None
