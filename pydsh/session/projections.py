"""The ``session_projections`` registry: fold units over session events (spec 10 §3).

Every committed event passes through every registered unit (``session/event``); a session's
cell for a unit is built lazily (init + fold over the in-memory log) when the unit arrives
after events flowed. Clients read one consistent cut with :meth:`SessionProjections.snapshot`.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer
from pydsh.session.hooks import SESSION_CREATED, SESSION_EVENT
from pydsh.session.keys import SESSION_PROJECTIONS, SESSIONS

if TYPE_CHECKING:
    from pydsh.session.events import Event
    from pydsh.session.log import Session

S = TypeVar("S")


@dataclass(frozen=True)
class Wire:
    """How a client sees a unit: a view of the state and the validator of that view."""

    view: Callable[[Any], Any]
    view_schema: Callable[[object], Any]


class ProjectionDefinition(Protocol, Generic[S]):
    """One fold unit (spec 10 §3.1); ``apply`` is pure and returns the same object when unchanged."""

    key: str
    state_version: int

    @property
    def wire(self) -> Wire | None:
        """How clients see the unit; ``None`` for a host-only unit."""

    def state_schema(self, raw: object) -> S:
        """Validate a persisted or restored state."""

    def init(self, header: dict[str, Any], inherited_event_count: int) -> S: ...

    def apply(self, state: S, event: Event) -> S: ...


Listener = Callable[["Session", str, Any], Any]


class _Unit:
    """A registered key: its definition and how many registrants hold it."""

    __slots__ = ("definition", "count")

    def __init__(self, definition: ProjectionDefinition[Any]) -> None:
        self.definition = definition
        self.count = 1


class _Cell:
    """One unit's state for one session, folded up to (not including) event ``upto``."""

    __slots__ = ("state", "upto")

    def __init__(self, state: Any, upto: int) -> None:
        self.state = state
        self.upto = upto


class SessionProjections:
    """The registry service: register units, fold sessions, serve snapshots and changes."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._units: dict[str, _Unit] = {}
        self._cells: weakref.WeakKeyDictionary[Session, dict[str, _Cell]] = weakref.WeakKeyDictionary()
        self._listeners: list[Listener] = []

    # -- registration ------------------------------------------------------------------------

    def register(self, ctx: Context, definition: ProjectionDefinition[Any]) -> Disposer:
        """Add (or share, counted) the unit ``definition.key``; an effect of ``ctx``'s fiber."""
        key = definition.key
        version = definition.state_version
        if type(version) is not int or version < 0:
            raise ValueError(f'session projection "{key}" stateVersion must be a non-negative integer, got {version}')
        unit = self._units.get(key)
        if unit is not None:
            held = unit.definition.state_version
            if held != version:
                raise ValueError(
                    f'session projection key "{key}" is already registered at stateVersion {held}; '
                    f"refusing to share it with stateVersion {version}"
                )
            unit.count += 1
        else:
            unit = _Unit(definition)
            self._units[key] = unit

        def release() -> None:
            unit.count -= 1
            if unit.count == 0 and self._units.get(key) is unit:
                del self._units[key]
                for cells in self._cells.values():
                    cells.pop(key, None)

        return ctx.register(release)

    def on_changed(self, ctx: Context, listener: Listener) -> Disposer:
        """Call ``listener(session, key, view)`` once per client-visible unit whose view changed."""
        self._listeners.append(listener)
        return ctx.register(lambda: self._listeners.remove(listener))

    def registered_keys(self) -> list[str]:
        return list(self._units)

    # -- folding -----------------------------------------------------------------------------

    def _cells_of(self, session: Session) -> dict[str, _Cell]:
        cells = self._cells.get(session)
        if cells is None:
            cells = {}
            self._cells[session] = cells
        return cells

    def _sync(self, session: Session, cells: dict[str, _Cell], key: str, unit: _Unit) -> _Cell:
        """Bring ``key``'s cell to the session cursor (built from the header when missing)."""
        definition = unit.definition
        cell = cells.get(key)
        if cell is None:
            cell = _Cell(definition.init(session.header, session.inherited_event_count), 0)
            cells[key] = cell
        events = session.events
        state = cell.state
        for i in range(cell.upto, len(events)):
            state = definition.apply(state, events[i])
        cell.state = state
        cell.upto = len(events)
        return cell

    def materialize(self, session: Session) -> dict[str, _Cell]:
        """Every unit's cell of ``session`` at its cursor."""
        cells = self._cells_of(session)
        for key, unit in tuple(self._units.items()):
            self._sync(session, cells, key, unit)
        return cells

    def state_of(self, session: Session, key: str) -> Any:
        """The live host state of ``key`` (callers must not mutate it), or ``None`` if unregistered."""
        if key not in self._units:
            return None
        return self.materialize(session)[key].state

    def snapshot(self, session: Session, keys: Iterable[str] | None = None) -> dict[str, Any]:
        """``{asOfSeq, values}``: one consistent cut over the client-visible units."""
        cells = self.materialize(session)
        wanted = set(keys) if keys is not None else None
        values: dict[str, Any] = {}
        for key, unit in self._units.items():
            wire = unit.definition.wire
            if wire is None or (wanted is not None and key not in wanted):
                continue
            values[key] = wire.view_schema(wire.view(cells[key].state))
        return {"asOfSeq": len(session.events) - 1, "values": values}

    def checkpoint(self, session: Session) -> dict[str, dict[str, Any]]:
        """``{key: {ver, seq, val}}`` rows (detached copies) for a persisted cache."""
        cells = self.materialize(session)
        return {
            key: {
                "ver": unit.definition.state_version,
                "seq": cells[key].upto - 1,
                "val": copy.deepcopy(cells[key].state),
            }
            for key, unit in self._units.items()
        }

    def restore(
        self,
        checkpoint: dict[str, dict[str, Any]],
        events: list[Event],
        base_seq: int,
        header: dict[str, Any],
        inherited_event_count: int,
    ) -> dict[str, Any]:
        """Cold read: every unit's state from usable ``checkpoint`` rows folded over ``events``.

        ``events`` is the stored suffix starting at ``base_seq``. A row of another version, one
        predating ``base_seq - 1`` or one beyond the supplied end is discarded; such a unit needs a
        full read from seq 0, so it is folded from its initial state only when ``base_seq`` is 0.
        """
        end = base_seq + len(events) - 1
        out: dict[str, Any] = {}
        for key, unit in self._units.items():
            definition = unit.definition
            row = checkpoint.get(key)
            usable = (
                row is not None
                and row.get("ver") == definition.state_version
                and base_seq - 1 <= row.get("seq", -2) <= end
            )
            if usable:
                assert row is not None
                state = definition.state_schema(copy.deepcopy(row["val"]))
                start = int(row["seq"]) + 1
            elif base_seq == 0:
                state = definition.init(header, inherited_event_count)
                start = 0
            else:
                continue
            for event in events[start - base_seq :]:
                state = definition.apply(state, event)
            out[key] = state
        return out

    # -- drive -------------------------------------------------------------------------------

    def on_event(self, session: Session, event: Event) -> None:
        """Fold one committed event through every unit (eager), then report changed views."""
        cells = self._cells_of(session)
        changed: list[tuple[str, Any]] = []
        for key, unit in tuple(self._units.items()):
            cell = cells.get(key)
            before = cell.state if cell is not None and cell.upto == event["seq"] else None
            cell = self._sync(session, cells, key, unit)
            wire = unit.definition.wire
            if wire is not None and self._listeners and cell.state is not before:
                changed.append((key, wire.view(cell.state)))
        for key, view in changed:
            for listener in tuple(self._listeners):
                listener(session, key, view)

    def on_created(self, session: Session) -> None:
        if not session.events:
            self.materialize(session)


name = "session-projection"
inject = (SESSIONS,)


def apply(ctx: Context, config: None) -> None:
    service = SessionProjections(ctx)
    ctx.provide(SESSION_PROJECTIONS, service)
    ctx.on(SESSION_EVENT, service.on_event, global_=True)
    ctx.on(SESSION_CREATED, service.on_created, global_=True)
