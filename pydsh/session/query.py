"""The ``session_query`` service: list and read live and persisted sessions (spec 02 §11.1).

Live sessions win over their persisted copies. Reads of persisted logs are repaired in memory
(closers applied, never written) and validated; they are never made live. With a ``session_index``
composed, listings and the titles of stored sessions come from it and read no log.
"""

from __future__ import annotations

from typing import Any

from pydsh.kernel.context import Context
from pydsh.session.errors import SessionPersistenceNotFoundError
from pydsh.session.events import Event
from pydsh.session.keys import SESSION_INDEX, SESSION_PERSISTENCE, SESSION_QUERY, SESSION_TITLE, SESSIONS
from pydsh.session.log import Session, SessionStore
from pydsh.session.repair import tail_turn_closers
from pydsh.session.title import TITLE, TitleService


class SessionQuery:
    """Listing and reading sessions, live-preferred."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def _sessions(self) -> SessionStore:
        return self.ctx.require(SESSIONS)

    async def list_sessions(self) -> list[dict[str, Any]]:
        """``[{header, live, persisted?}]`` newest first; persisted logs contribute headers only."""
        rows: dict[str, dict[str, Any]] = {}
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        index = self.ctx.get(SESSION_INDEX)
        if persistence is not None:
            for item in await (index.stored() if index is not None else persistence.list()):
                rows[item["header"]["id"]] = {
                    "header": item["header"],
                    "live": False,
                    "persisted": {"revision": item["revision"]},
                }
        for session in self._sessions.live():
            row = rows.setdefault(session.id, {"header": session.header})
            row["header"] = session.header
            row["live"] = True
        return sorted(rows.values(), key=lambda r: (-r["header"]["createdAt"], r["header"]["id"]))

    async def read_session(self, session_id: str) -> dict[str, Any]:
        """``{session: header, events}``: the live log, or the repaired and validated stored one."""
        live = self._sessions.get(session_id)
        if live is not None:
            return {"session": live.header, "events": list(live.events)}
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        if persistence is None:
            raise SessionPersistenceNotFoundError(f'session "{session_id}" not found')
        handle = await persistence.open(session_id, "read")
        events = await handle.read()
        repaired = events + tail_turn_closers(events)
        Session(handle.header, repaired, inherited_event_count=handle.inherited_event_count)
        return {"session": handle.header, "events": repaired}

    async def read(self, session_id: str) -> Session:
        """The live session, else the stored log repaired and validated once (read only, never made live)."""
        live = self._sessions.get(session_id)
        if live is not None:
            return live
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        if persistence is None:
            raise SessionPersistenceNotFoundError(f'session "{session_id}" not found')
        handle = await persistence.open(session_id, "read")
        events = await handle.read()
        repaired = events + tail_turn_closers(events)
        return Session(handle.header, repaired, inherited_event_count=handle.inherited_event_count)

    async def _session(self, session_id: str) -> Session:
        return await self.read(session_id)

    async def list_events(self, session_id: str, from_seq: int = 0, to_seq: int | None = None) -> list[Event]:
        events: list[Event] = (await self.read_session(session_id))["events"]
        return events[from_seq : None if to_seq is None else to_seq + 1]

    async def read_event(self, session_id: str, seq: int) -> Event:
        events = (await self.read_session(session_id))["events"]
        if not 0 <= seq < len(events):
            raise IndexError(f'session "{session_id}" has no event {seq}')
        return events[seq]  # type: ignore[no-any-return]

    async def read_surface(self, session_id: str) -> dict[str, Any]:
        session = await self._session(session_id)
        nodes = session.surface.nodes
        return {
            "session": session.header,
            "capturedThroughSeq": session.seq,
            "events": [session.events[s] for s in nodes],
        }

    async def read_title(self, session_id: str) -> dict[str, Any] | None:
        """The title snapshot; without a ``session/title``, the fallback computed on the fly."""
        indexed = await self._indexed([session_id])
        if session_id in indexed:
            return indexed[session_id]
        session = await self._session(session_id)
        state = session.fold(TITLE)
        if state is not None:
            return state  # type: ignore[no-any-return]
        titles: TitleService | None = self.ctx.get(SESSION_TITLE)
        found = titles.fallback_for(session.events) if titles is not None else None
        if found is None:
            return None
        title, seq = found
        return {
            "title": title,
            "messageSeqs": [seq],
            "source": {"kind": "fallback"},
            "eventSeq": None,
            "updatedAt": session.events[seq]["time"],
        }

    async def read_title_snapshots(self, session_ids: list[str]) -> list[dict[str, Any]]:
        """One result per id: ``{id, ok: True, title}`` or ``{id, ok: False, error}``."""
        indexed = await self._indexed(session_ids)
        out = []
        for sid in session_ids:
            try:
                title = indexed[sid] if sid in indexed else await self.read_title(sid)
                out.append({"id": sid, "ok": True, "title": title})
            except Exception as exc:
                out.append({"id": sid, "ok": False, "error": str(exc)})
        return out

    async def _indexed(self, session_ids: list[str]) -> dict[str, dict[str, Any] | None]:
        """Title snapshots the session index holds for those of ``session_ids`` that are stored, not live."""
        index = self.ctx.get(SESSION_INDEX)
        stored = [sid for sid in session_ids if self._sessions.get(sid) is None]
        if index is None or not stored:
            return {}
        titles: dict[str, dict[str, Any] | None] = await index.titles(stored)
        return titles


name = "session-query"
inject = (SESSIONS,)
optional = (SESSION_PERSISTENCE, SESSION_TITLE, SESSION_INDEX)


def apply(ctx: Context, config: None) -> None:
    ctx.provide(SESSION_QUERY, SessionQuery(ctx))
