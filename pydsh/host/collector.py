"""Pacing CPython's cyclic garbage collector while an app runs.

A full (generation 2) collection walks every tracked container, and a process hosting hundreds of sessions
holds hundreds of thousands (each logged event is a frozen dict): at CPython's own pace that stalls every
session for a few hundred ms every few seconds. While paced, the survivors of each full collection are
frozen (``gc.freeze``), so the next ones walk only what is newer. Frozen objects are still freed by
reference counting; only reference cycles among them wait, until a thaw lets a full collection walk the
whole heap again. A thaw comes when the process is idle and the frozen heap has grown by
:data:`IDLE_GROWTH` since the last whole walk, when it has grown :data:`BUSY_GROWTH` times (a process that
is never idle), and on :func:`collect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import Any

IDLE_GROWTH = 1.5
"""An idle process walks its whole heap once the frozen part has grown by half since the last walk."""
BUSY_GROWTH = 4
"""A busy process walks its whole heap (one long pause) once the frozen part has grown four times."""
FLOOR = 100_000
"""Growth is measured from at least this many objects (start-up alone freezes tens of thousands)."""
MIDDLE_EVERY = 2
"""A generation-1 collection after every third generation-0 one (CPython waits for eleven), so each walks a
third as many survivors: shorter pauses for the same work, since an object that lives on is walked once in
each generation however often they are collected."""
FULL_EVERY = 1
"""A full collection after every second generation-1 collection (CPython waits for eleven): each walks
only the few objects that lived through the last ones, so it is short, however many sessions are in flight."""
IDLE_CHECK_S = 5.0
"""How often the process is asked whether it is idle."""


class Pacer:
    """Freezes the survivors of each full collection; thaws by the growth rules of this module."""

    def __init__(self, idle: Callable[[], bool]) -> None:
        self._idle = idle
        self._frozen = 0
        """Objects frozen since the last thaw, counted from each full collection's survivors: an upper bound,
        since many die after their freeze; :meth:`_grown` recounts before any thaw."""
        self._walked = FLOOR
        """Objects frozen by the last full collection that walked the whole heap."""
        self._whole = False
        """Whether the next full collection walks the whole heap (a thaw came before it)."""

    def after_collection(self, phase: str, info: dict[str, Any]) -> None:
        """The ``gc.callbacks`` hook: freeze what a full collection left; thaw past the busy growth bound."""
        if phase != "stop" or info["generation"] != 2:
            return
        self._frozen += len(gc.get_objects(generation=2))
        gc.freeze()
        if self._whole:
            self._whole = False
            self._walked = max(self._frozen, FLOOR)
        elif self._grown(BUSY_GROWTH):
            self.thaw()

    def _grown(self, factor: float) -> bool:
        """Whether the frozen part is more than ``factor`` times the last walk's. The running count is cheap but
        counts every survivor that has since died (a busy process's request state); past the bound, the frozen
        objects are counted one by one (a few ms per million), so churn alone never costs a whole walk."""
        bound = factor * self._walked
        if self._frozen > bound:
            self._frozen = gc.get_freeze_count()
        return self._frozen > bound

    def thaw(self) -> None:
        """Put the frozen heap back in the collector's view: the next full collection walks all of it."""
        gc.unfreeze()
        self._frozen = 0
        self._whole = True

    def collect(self) -> int:
        """A full collection that walks the whole heap now; returns what it found unreachable."""
        self.thaw()
        return gc.collect()

    def check_idle(self) -> None:
        """Walk the whole heap now if the process is idle and the frozen part has grown enough to be worth it."""
        if self._idle() and self._grown(IDLE_GROWTH):
            self.collect()


_pacer: Pacer | None = None


@contextlib.contextmanager
def paced(idle: Callable[[], bool]) -> Iterator[Pacer]:
    """Pace the collector until the block ends (then everything frozen is thawed); ``idle`` says whether
    nothing runs that a pause would stall. Needs a running event loop (the idle check is a timer on it)."""
    global _pacer
    if _pacer is not None:
        raise RuntimeError("the collector is already paced")
    pacer = _pacer = Pacer(idle)
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle

    def tick() -> None:
        nonlocal timer
        pacer.check_idle()
        timer = loop.call_later(IDLE_CHECK_S, tick)

    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], MIDDLE_EVERY, FULL_EVERY)
    gc.callbacks.append(pacer.after_collection)
    timer = loop.call_later(IDLE_CHECK_S, tick)
    try:
        yield pacer
    finally:
        timer.cancel()
        gc.callbacks.remove(pacer.after_collection)
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        _pacer = None


def collect() -> int:
    """A full collection of the whole heap, frozen part included (e.g. after letting a session go, whose
    agent, scopes and contexts refer to each other); returns what it found unreachable."""
    return gc.collect() if _pacer is None else _pacer.collect()
