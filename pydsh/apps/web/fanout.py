"""Bounded per-subscriber frame queues for the web streams (spec 12 §4.3 rule 3).

A subscriber that falls 10,000 frames behind is dropped with an ``overflow`` mark; publishing
never blocks and never raises into the agent loop.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

QUEUE_LIMIT = 10_000

Frame = tuple[str, Any, "int | None"]
"""``(event name, JSON data, SSE id)``; only ``session-event`` frames carry an id (their seq)."""


@dataclass(eq=False)
class Subscriber:
    """One open stream: frames wait here until its response writes them."""

    limit: int = QUEUE_LIMIT
    frames: deque[Frame] = field(default_factory=deque)
    overflowed: bool = False
    closed: bool = False
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, frame: Frame) -> None:
        """Queue ``frame``; a full queue marks the subscriber overflowed instead."""
        if self.closed or self.overflowed:
            return
        if len(self.frames) >= self.limit:
            self.overflowed = True
            self.frames.clear()
        else:
            self.frames.append(frame)
        self._ready.set()

    def close(self) -> None:
        """End the stream after what is queued (server stopping)."""
        self.closed = True
        self._ready.set()

    async def next_batch(self, timeout: float) -> list[Frame] | None:
        """Queued frames (``[]`` after ``timeout`` seconds of silence); ``None`` once closed or overflowed."""
        if not self.frames and not self.closed and not self.overflowed:
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return []
        if self.overflowed or (self.closed and not self.frames):
            return None
        batch = list(self.frames)
        self.frames.clear()
        return batch


class Topic:
    """The subscribers of one key (a session id, or the index)."""

    def __init__(self) -> None:
        self._subs: dict[str, set[Subscriber]] = {}

    def add(self, key: str, sub: Subscriber) -> None:
        self._subs.setdefault(key, set()).add(sub)

    def remove(self, key: str, sub: Subscriber) -> None:
        subs = self._subs.get(key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[key]

    def has(self, key: str) -> bool:
        return key in self._subs

    def publish(self, key: str, frame: Frame) -> None:
        for sub in tuple(self._subs.get(key, ())):
            sub.put(frame)

    def close_all(self) -> None:
        for subs in self._subs.values():
            for sub in subs:
                sub.close()


class Newest:
    """Tickets for reads of one key that may overlap (a change arrives while the last read is under way):
    only the newest read's answer is sent, so an older one that finishes last never overwrites it."""

    def __init__(self) -> None:
        self._count = itertools.count(1)
        self._latest: dict[str, int] = {}

    def take(self, key: str) -> int:
        """A ticket for a read of ``key`` starting now."""
        ticket = self._latest[key] = next(self._count)
        return ticket

    def newest(self, key: str, ticket: int) -> bool:
        """Whether ``ticket`` is still the newest read of ``key`` (then the key is forgotten)."""
        if self._latest.get(key) != ticket:
            return False
        del self._latest[key]
        return True
