"""The live session log and the ``sessions`` store (spec 02 §3, §10).

A :class:`Session` is an append-only event list: every append is validated by the same rules
that validate a log read from disk, committed, then published as ``session/event``. The store
creates, resumes and forks sessions and dispatches the ``session/*`` events.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pydsh.kernel.context import Context
from pydsh.session.errors import SessionForkError, SessionLogError
from pydsh.session.events import (
    Event,
    build_event,
    check_envelope,
    collector_paused,
    freeze,
    header_problem,
    inherited_event_count,
    snapshot,
)
from pydsh.session.hooks import SESSION_CREATED, SESSION_DISPOSED, SESSION_EVENT, SESSION_FLUSH
from pydsh.session.keys import SESSIONS
from pydsh.session.repair import tail_turn_closers
from pydsh.session.rules import LogRules
from pydsh.session.surface import Surface


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Projection(Protocol):
    """A fold over committed events (an ``inbox``, a title, a policy state…)."""

    key: str

    def init(self) -> Any: ...

    def fold(self, state: Any, event: Event) -> Any: ...


class Session:
    """One live, append-only session log."""

    def __init__(
        self,
        header: dict[str, Any],
        events: Iterable[Event] = (),
        *,
        inherited_event_count: int = 0,
        checked: bool = False,
    ) -> None:
        """A session of ``events``, each admitted by the log rules; ``checked`` says a reader already
        checked their envelopes (``SessionHandle.read``), so only the rules run again."""
        problem = header_problem(header)
        if problem:
            raise SessionLogError(None, f'session "{header.get("id")}": {problem}')
        self.header = header
        self.id: str = header["id"]
        self.events: list[Event] = []
        self.inherited_event_count = inherited_event_count
        self._rules = LogRules(self.events, inherited_event_count)
        self._publishing = False
        self.publish: Callable[[Session, Event], None] | None = None
        self.scope: object | None = None
        self._folds: dict[str, tuple[Any, int]] = {}
        self._last_header: dict[str, Any] | None = None
        self._last_context: dict[str, Any] | None = None
        with collector_paused():
            for event in events:
                if not checked:
                    check_envelope(event, len(self.events))
                self._commit({key: freeze(value) for key, value in event.items()})
        self._rules.check_seed(header["isSeeded"])

    def __repr__(self) -> str:
        return f"<Session {self.id} events={len(self.events)}>"

    @property
    def seq(self) -> int:
        """Seq of the last event (``-1`` for an empty log)."""
        return len(self.events) - 1

    @property
    def surface(self) -> Surface:
        return self._rules.surface

    @property
    def last_time(self) -> int:
        return self.events[-1]["time"] if self.events else 0

    def _commit(self, event: Event) -> None:
        self._rules.check(event)
        self.events.append(event)
        self._rules.apply(event)
        etype = event["type"]
        if etype == "request/header":
            self._last_header = event["data"]["header"]
        elif etype == "request/context":
            self._last_context = event["data"]

    def append(
        self,
        event_type: str,
        data: Any,
        *,
        surface_op: Any = None,
        source_event_seqs: list[int] | None = None,
        ignorable: bool = False,
    ) -> Event:
        """Validate, snapshot, commit and publish one event (spec 02 §3)."""
        if self._publishing:
            raise RuntimeError("append reentered another append's publication")
        seq = len(self.events)
        event = build_event(
            event_type,
            seq,
            max(now_ms(), self.last_time),
            snapshot(data),
            ignorable=ignorable,
            source_event_seqs=snapshot(source_event_seqs, "sourceEventSeqs") if source_event_seqs else None,
            surface_op=snapshot(surface_op, "surfaceOp") if surface_op is not None else None,
        )
        check_envelope(event, seq)
        self._commit(event)
        if self.publish is not None:
            self._publishing = True
            try:
                self.publish(self, event)
            finally:
                self._publishing = False
        return event

    # -- folds ----------------------------------------------------------------------------

    def derive_messages(self) -> list[dict[str, Any]]:
        """The model history: the current surface projected to messages (spec 02 §8)."""
        return self._rules.surface.messages()

    def request_header(self) -> dict[str, Any] | None:
        """The latest logged ``request/header`` header (the folded request config and tools)."""
        return self._last_header

    def request_context(self) -> dict[str, Any] | None:
        return self._last_context

    def tool_history(self) -> list[str]:
        """Names of the tools of the latest request header (what the model was last offered)."""
        header = self._last_header or {}
        return [t["name"] for t in header.get("tools", ())]

    def fold(self, unit: Projection) -> Any:
        """The state of ``unit`` over every committed event, folded incrementally."""
        state, upto = self._folds.get(unit.key, (None, 0))
        if upto == 0:
            state = unit.init()
        events = self.events
        for i in range(upto, len(events)):
            event = events[i]
            if not event.get("ignorable"):
                state = unit.fold(state, event)
        self._folds[unit.key] = (state, len(events))
        return state

    @property
    def open_turn(self) -> int | None:
        """Number of the open turn, or ``None`` between turns."""
        return self._rules.placement.open_turn

    @property
    def open_step(self) -> int | None:
        return self._rules.placement.open_step

    @property
    def lifecycle_start(self) -> int:
        """Seq of the latest ``session/end-seed`` marker (0 when the log has none)."""
        return self._rules.last_marker or 0


class SessionStore:
    """The ``sessions`` service: live sessions and the ``session/*`` events."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._live: dict[str, Session] = {}

    def _publish(self, session: Session, event: Event) -> None:
        self.ctx.emit(SESSION_EVENT, session, event, scope=session.scope)

    def new(
        self,
        header: dict[str, Any],
        prefix_events: Iterable[Event] = (),
        *,
        inherited_event_count: int = 0,
    ) -> Session:
        """Build a session from ``prefix_events`` (not published); later appends are."""
        session = Session(header, prefix_events, inherited_event_count=inherited_event_count)
        session.publish = self._publish
        return session

    def from_stored(self, header: dict[str, Any], events: list[Event]) -> Session:
        """A session rebuilt from a repaired stored log (events as ``SessionHandle.read`` returns them,
        plus repair closers), with its ``session/end-seed {}`` marker."""
        marker = events[-1]["seq"] + 1 if events else 0
        inherited = inherited_event_count(events) if header.get("isSeeded") else 0
        session = Session(header, events, inherited_event_count=inherited, checked=True)
        if not events or events[-1]["type"] != "session/end-seed":
            end_seed = build_event("session/end-seed", marker, max(now_ms(), session.last_time), snapshot({}))
            session._commit(end_seed)
        session.publish = self._publish
        return session

    async def enter(self, session: Session) -> None:
        """Publish ``session`` as live; a ``session/created`` listener may veto by raising."""
        if session.id in self._live:
            raise SessionForkError("SESSION_ALREADY_EXISTS", f'session "{session.id}" is already live')
        self._live[session.id] = session
        try:
            await self.ctx.serial(SESSION_CREATED, session, scope=session.scope)
        except BaseException:
            self._live.pop(session.id, None)
            raise

    def leave(self, session: Session) -> None:
        if self._live.get(session.id) is session:
            del self._live[session.id]
            self.ctx.emit(SESSION_DISPOSED, session, scope=session.scope)

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def live(self) -> list[Session]:
        return list(self._live.values())

    async def flush(self, session: Session) -> None:
        """The durability barrier: everything appended so far reaches disk."""
        await self.ctx.parallel(SESSION_FLUSH, session, scope=session.scope)

    def fork_prefix(self, source: Session, boundary: int | None = None) -> list[Event]:
        """Events ``0..boundary`` of ``source``, the inherited marker and ``forked`` closers."""
        last = source.seq if boundary is None else boundary
        if type(last) is not int or not 0 <= last <= source.seq:
            raise SessionForkError("INVALID_BOUNDARY", f"fork boundary {boundary} is not a seq of {source.id}")
        prefix = list(source.events[: last + 1])
        prefix.append(build_event("session/end-seed", last + 1, prefix[-1]["time"], {"inherited": True}))
        prefix.extend(tail_turn_closers(prefix, "forked"))
        return prefix


def new_session_id() -> str:
    """A minted session id: UUID4, which can never match an agent-name segment (spec 07 §7.8)."""
    return str(uuid.uuid4())


name = "session"


def apply(ctx: Context, config: None) -> None:
    ctx.provide(SESSIONS, SessionStore(ctx))
