"""Typed events with five dispatch modes, declared listener order and scope admission (spec 01 §6).

An event is declared once, by the package that owns it, as an instance of its mode's class —
:class:`Emit`, :class:`Parallel`, :class:`Serial`, :class:`Bail` or :class:`Waterfall` — whose type
parameters are its payload (and result), so mypy checks both dispatch sites and listeners.

Listeners carry a name and may say which listeners they run ``before`` or ``after``; an event may
also declare the ``order`` of the listeners it knows. The bus keeps each table topologically sorted
(ties keep registration order) and refuses a registration that would make the order contradictory.
Listener lists are tuples rebuilt only when a listener is added or removed, and scope admission is one
set-membership test.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar, TypeVarTuple

from pydsh.kernel.errors import KernelError
from pydsh.kernel.invariants import InvariantError
from pydsh.kernel.scope import ScopeTree

Mode = Literal["emit", "parallel", "serial", "bail", "waterfall"]

Ts = TypeVarTuple("Ts")
T = TypeVar("T")
R = TypeVar("R")

Next = Callable[[], Awaitable[R]]
"""What a waterfall listener calls to run the listeners inside it (and finally the default)."""

log = logging.getLogger("pydsh.events")

_DECLARED: dict[str, Event] = {}


class Event:
    """One declared event: its name, its dispatch mode, what it is for and the order of known listeners."""

    mode: ClassVar[Mode]
    __slots__ = ("name", "doc", "order")

    def __init__(self, name: str, doc: str = "", *, order: Iterable[str] = ()) -> None:
        if name in _DECLARED:
            raise TypeError(f"event {name!r} is already declared (as {_DECLARED[name].mode!r})")
        self.name = name
        self.doc = doc
        self.order = tuple(order)
        _DECLARED[name] = self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Emit(Event, Generic[*Ts]):
    """Fire and forget: every listener is called; a failing one is logged and skipped."""

    mode = "emit"
    __slots__ = ()


class Parallel(Event, Generic[*Ts]):
    """Every listener runs concurrently; the first failure is raised once all have finished."""

    mode = "parallel"
    __slots__ = ()


class Serial(Event, Generic[*Ts, R]):
    """Listeners run one after another until one returns a value (neither ``None`` nor ``False``)."""

    mode = "serial"
    __slots__ = ()


class Bail(Event, Generic[*Ts, R]):
    """Like :class:`Serial`, synchronously."""

    mode = "bail"
    __slots__ = ()


class Waterfall(Event, Generic[T, R]):
    """Around-middleware over a payload: the first listener is outermost and decides whether to go on."""

    mode = "waterfall"
    __slots__ = ()


def declared_events() -> list[Event]:
    """Every event declared so far in this process, by name."""
    return [_DECLARED[name] for name in sorted(_DECLARED)]


@dataclass(frozen=True, slots=True, eq=False)
class Listener:
    """One registration: the callable, its scope tag and where it stands among its event's listeners."""

    fn: Callable[..., Any]
    tag: object | None
    global_: bool
    name: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


_NO_LISTENERS: tuple[Listener, ...] = ()


class EventBus:
    """Listener tables for one process (one root context)."""

    def __init__(self, scopes: ScopeTree) -> None:
        self.scopes = scopes
        self._listeners: dict[Event, tuple[Listener, ...]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def add(self, event: Event, entry: Listener) -> Callable[[], None]:
        """Insert ``entry`` where its constraints put it; ``KernelError(EVENT_ORDER)`` on a contradiction."""
        cur = self._listeners.get(event, _NO_LISTENERS)
        self._listeners[event] = ordered(event, (*cur, entry))

        def remove() -> None:
            now = self._listeners.get(event, _NO_LISTENERS)
            if entry in now:
                self._listeners[event] = tuple(x for x in now if x is not entry)

        return remove

    def listeners(self, event: Event) -> tuple[Listener, ...]:
        """The listeners of ``event`` in dispatch order."""
        return self._listeners.get(event, _NO_LISTENERS)

    def admitted(self, event: Event, scope: object | None) -> list[Callable[..., Any]]:
        """Listeners of ``event`` admitted for a dispatch keyed by ``scope``."""
        entries = self._listeners.get(event, _NO_LISTENERS)
        if not entries:
            return []
        if scope is None:
            return [e.fn for e in entries if e.tag is None or e.global_]
        admitted: list[Callable[..., Any]] = []
        ancestors: frozenset[int] | None = None  # only a scoped listener needs them (most events have none)
        for e in entries:
            if e.tag is not None and not e.global_:
                if ancestors is None:
                    ancestors = self.scopes.ancestors(scope)
                if id(e.tag) not in ancestors:
                    continue
            admitted.append(e.fn)
        return admitted

    def has_listeners(self, event: Event) -> bool:
        return bool(self._listeners.get(event))

    # -- dispatch modes -------------------------------------------------------------------

    def emit(self, event: Emit[*Ts], *args: *Ts, scope: object | None = None) -> None:
        """Call every listener; a failing one is logged and skipped, but an ``InvariantError`` propagates."""
        for fn in self.admitted(event, scope):
            try:
                result = fn(*args)
            except InvariantError:
                raise
            except Exception:
                log.warning("listener of %s failed", event.name, exc_info=True)
                continue
            if inspect.isawaitable(result):
                self._watch(event.name, result)

    def _watch(self, name: str, awaitable: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await awaitable
            except InvariantError:
                log.error("async listener of %s saw an invariant violation", name, exc_info=True)
            except Exception:
                log.warning("async listener of %s failed", name, exc_info=True)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def parallel(self, event: Parallel[*Ts], *args: *Ts, scope: object | None = None) -> None:
        fns = self.admitted(event, scope)
        if not fns:
            return
        if len(fns) == 1:  # the common case (one flush listener per barrier): no task, no gathering future
            await _call_async(fns[0], args)
            return
        results = await asyncio.gather(*(_call_async(fn, args) for fn in fns), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def serial(self, event: Serial[*Ts, R], *args: *Ts, scope: object | None = None) -> R | None:
        for fn in self.admitted(event, scope):
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
            if result is not None and result is not False:
                return result  # type: ignore[no-any-return]
        return None

    def bail(self, event: Bail[*Ts, R], *args: *Ts, scope: object | None = None) -> R | None:
        for fn in self.admitted(event, scope):
            result = fn(*args)
            if result is not None and result is not False:
                return result  # type: ignore[no-any-return]
        return None

    async def waterfall(
        self,
        event: Waterfall[T, R],
        payload: T,
        default: Callable[[], R | Awaitable[R]],
        *,
        scope: object | None = None,
    ) -> R:
        """Around-middleware: the first listener is outermost; ``await next()`` calls inward."""
        return await _inward(self.admitted(event, scope), 0, payload, default)


async def _inward(fns: list[Callable[..., Any]], i: int, payload: T, default: Callable[[], R | Awaitable[R]]) -> R:
    """Waterfall listener ``i`` (the default past the last), its ``next`` calling the one after; a module
    function rather than a closure calling itself, so a chain leaves no reference cycle behind."""
    if i == len(fns):
        result = default()
        return await result if inspect.isawaitable(result) else result
    return await fns[i](payload, lambda: _inward(fns, i + 1, payload, default))  # type: ignore[no-any-return]


def ordered(event: Event, entries: tuple[Listener, ...]) -> tuple[Listener, ...]:
    """``entries`` sorted so every declared constraint holds, otherwise in registration order.

    Constraints come from the event's ``order`` and each listener's ``before``/``after``; a name no
    present listener carries constrains nothing. Each listener, taken in registration order, is placed
    right after the listeners that must precede it, so a constraint moves as little as it can. A
    cycle raises ``KernelError(EVENT_ORDER)`` naming it.
    """
    edges = _edges(event, entries)
    if not edges:
        return entries
    preceding: dict[int, list[int]] = {}
    for i, targets in edges.items():
        for j in targets:
            preceding.setdefault(j, []).append(i)
    placed: list[int] = []
    state: dict[int, bool] = {}
    """``False`` while a listener's predecessors are being placed, ``True`` once it is placed."""

    def place(i: int, path: list[int]) -> None:
        if state.get(i) is True:
            return
        if i in state:
            cycle = [i, *reversed(path[path.index(i) :])]
            raise KernelError(
                "EVENT_ORDER",
                f"{event.name}: contradictory listener order " + " -> ".join(entries[k].name for k in cycle),
            )
        state[i] = False
        for j in sorted(preceding.get(i, ())):
            place(j, [*path, i])
        state[i] = True
        placed.append(i)

    for i in range(len(entries)):
        place(i, [])
    return tuple(entries[i] for i in placed)


def _edges(event: Event, entries: tuple[Listener, ...]) -> dict[int, set[int]]:
    """``i -> {j}`` when listener ``i`` must run before listener ``j``."""
    by_name: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        by_name.setdefault(entry.name, []).append(i)
    edges: dict[int, set[int]] = {}

    def link(first: str, then: str) -> None:
        for i in by_name.get(first, ()):
            for j in by_name.get(then, ()):
                if i != j:
                    edges.setdefault(i, set()).add(j)

    present = [name for name in event.order if name in by_name]
    for first, then in itertools.pairwise(present):
        link(first, then)
    for entry in entries:
        for other in entry.before:
            link(entry.name, other)
        for other in entry.after:
            link(other, entry.name)
    return edges


async def _call_async(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result
