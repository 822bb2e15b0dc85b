"""Typed events with five dispatch modes and scope-filtered listeners (spec 01 §6).

Every event name is declared once with :func:`define_event`; dispatching an undeclared name or
with the wrong mode raises ``TypeError``. Listener lists are tuples rebuilt only when a
listener is added or removed, and scope admission is one set-membership test.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydsh.kernel.invariants import InvariantError
from pydsh.kernel.scope import ScopeTree

Mode = Literal["emit", "parallel", "serial", "bail", "waterfall"]
MODES: frozenset[str] = frozenset({"emit", "parallel", "serial", "bail", "waterfall"})

log = logging.getLogger("pydsh.events")


@dataclass(frozen=True, slots=True)
class EventSpec:
    """Declaration of one event: its name, dispatch mode and (documentary) payload type."""

    name: str
    mode: Mode
    payload: object = None


_SPECS: dict[str, EventSpec] = {}


def define_event(name: str, mode: Mode, payload: object = None) -> EventSpec:
    """Declare ``name`` with ``mode``; re-declaring with the same mode is a no-op."""
    if mode not in MODES:
        raise TypeError(f"unknown event mode {mode!r} for {name!r}")
    spec = _SPECS.get(name)
    if spec is not None:
        if spec.mode != mode:
            raise TypeError(f"event {name!r} is already declared with mode {spec.mode!r}")
        return spec
    spec = EventSpec(name, mode, payload)
    _SPECS[name] = spec
    return spec


@dataclass(frozen=True, slots=True)
class Listener:
    fn: Callable[..., Any]
    tag: object | None
    global_: bool


_NO_LISTENERS: tuple[Listener, ...] = ()


class EventBus:
    """Listener tables for one process (one root context)."""

    def __init__(self, scopes: ScopeTree) -> None:
        self.scopes = scopes
        self._listeners: dict[str, tuple[Listener, ...]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def add(
        self, name: str, fn: Callable[..., Any], tag: object | None, *, prepend: bool, global_: bool
    ) -> Callable[[], None]:
        if name not in _SPECS:
            raise TypeError(f"event {name!r} is not declared")
        entry = Listener(fn, tag, global_)
        cur = self._listeners.get(name, _NO_LISTENERS)
        self._listeners[name] = (entry, *cur) if prepend else (*cur, entry)

        def remove() -> None:
            now = self._listeners.get(name, _NO_LISTENERS)
            if entry in now:
                self._listeners[name] = tuple(x for x in now if x is not entry)

        return remove

    def admitted(self, name: str, mode: Mode, scope: object | None) -> list[Callable[..., Any]]:
        """Listeners of ``name`` admitted for a dispatch keyed by ``scope``."""
        spec = _SPECS.get(name)
        if spec is None:
            raise TypeError(f"event {name!r} is not declared")
        if spec.mode != mode:
            raise TypeError(f"event {name!r} is declared {spec.mode!r}, dispatched as {mode!r}")
        entries = self._listeners.get(name, _NO_LISTENERS)
        if not entries:
            return []
        if scope is None:
            return [e.fn for e in entries if e.tag is None or e.global_]
        ancestors = self.scopes.ancestors(scope)
        return [e.fn for e in entries if e.tag is None or e.global_ or id(e.tag) in ancestors]

    def has_listeners(self, name: str) -> bool:
        return bool(self._listeners.get(name))

    # -- dispatch modes -------------------------------------------------------------------

    def emit(self, name: str, *args: Any, scope: object | None = None) -> None:
        """Call every listener; a failing one is logged and skipped, but an ``InvariantError`` propagates."""
        for fn in self.admitted(name, "emit", scope):
            try:
                result = fn(*args)
            except InvariantError:
                raise
            except Exception:
                log.warning("listener of %s failed", name, exc_info=True)
                continue
            if inspect.isawaitable(result):
                self._watch(name, result)

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

    async def parallel(self, name: str, *args: Any, scope: object | None = None) -> None:
        fns = self.admitted(name, "parallel", scope)
        if not fns:
            return
        results = await asyncio.gather(*(_call_async(fn, args) for fn in fns), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def serial(self, name: str, *args: Any, scope: object | None = None) -> Any:
        for fn in self.admitted(name, "serial", scope):
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
            if result is not None and result is not False:
                return result
        return None

    def bail(self, name: str, *args: Any, scope: object | None = None) -> Any:
        for fn in self.admitted(name, "bail", scope):
            result = fn(*args)
            if result is not None and result is not False:
                return result
        return None

    async def waterfall(
        self,
        name: str,
        payload: Any,
        default: Callable[[], Any],
        *,
        scope: object | None = None,
    ) -> Any:
        """Around-middleware: the first listener is outermost; ``await next()`` calls inward."""
        fns = self.admitted(name, "waterfall", scope)

        async def call(i: int) -> Any:
            if i == len(fns):
                result = default()
                return await result if inspect.isawaitable(result) else result
            return await fns[i](payload, lambda: call(i + 1))

        return await call(0)


async def _call_async(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result
