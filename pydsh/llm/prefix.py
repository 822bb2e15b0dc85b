"""What an adapter converted of a session's history, kept so each logged message is converted once.

A request's messages are the log's surface (spec 03 §7.2): the frozen message objects of earlier steps
come back, the same objects, at the front of every later request of the session until a compaction or
an edit rewrites the surface. An adapter keeps the state it reached after such a prefix and resumes from
it, so a step costs the messages it adds, not the whole history. A request that does not start with the
kept messages is converted from its start, as before; a plain (mutable) message ends what is kept, since
it could change under the same identity.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from pydsh.session.events import FrozenDict


class Converter(Protocol):
    """An adapter's history conversion in progress: messages are added one by one; a fork goes on apart."""

    def add(self, message: dict[str, Any]) -> None: ...

    def fork(self) -> Any: ...


S = TypeVar("S")
C = TypeVar("C", bound=Converter)

LIMIT = 100_000
"""Messages kept over all sessions; the least recently used prefixes go first beyond it."""


def frozen_run(messages: Sequence[dict[str, Any]], start: int) -> int:
    """The index of the first message at or after ``start`` that is not frozen (``len(messages)`` when none)."""
    for index in range(start, len(messages)):
        if type(messages[index]) is not FrozenDict:
            return index
    return len(messages)


class PrefixCache(Generic[S]):
    """Converted prefixes by key (a session and whatever else the conversion depends on), least recent out first."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._entries: OrderedDict[Hashable, tuple[tuple[dict[str, Any], ...], S]] = OrderedDict()
        self._size = 0

    def resume(self, key: Hashable, messages: Sequence[dict[str, Any]]) -> tuple[int, S] | None:
        """``(count, state)`` when ``messages`` start with the prefix kept under ``key``, else ``None``."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        prefix, state = entry
        if len(prefix) > len(messages) or not all(map(operator.is_, prefix, messages)):
            return None
        self._entries.move_to_end(key)
        return len(prefix), state

    def store(self, key: Hashable, messages: Sequence[dict[str, Any]], state: S) -> None:
        """Keep ``state`` as what ``messages`` (all frozen) converted to, in place of the key's earlier prefix."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._size -= len(old[0])
        self._entries[key] = (tuple(messages), state)
        self._size += len(messages)
        while self._size > self.limit:
            _key, (prefix, _state) = self._entries.popitem(last=False)
            self._size -= len(prefix)


def convert(cache: PrefixCache[C], key: Hashable | None, fresh: C, messages: Sequence[dict[str, Any]]) -> C:
    """``fresh`` with ``messages`` added, resumed from the prefix kept under ``key`` when they start with it (no
    ``key``: nothing is kept); the frozen run of messages it reaches is kept for the next request."""
    resumed = cache.resume(key, messages) if key is not None else None
    start, converter = (0, fresh) if resumed is None else (resumed[0], resumed[1].fork())
    end = frozen_run(messages, start)
    for message in messages[start:end]:
        converter.add(message)
    if key is not None and end > start:
        cache.store(key, messages[:end], converter.fork())
    for message in messages[end:]:
        converter.add(message)
    return converter


def whole(cache: PrefixCache[S], key: Hashable | None, items: Sequence[dict[str, Any]], build: Callable[[], S]) -> S:
    """``build()``, kept under ``key`` while the request carries the very same (frozen) ``items``: a session's
    logged tool list comes back unchanged at every step until its header changes."""
    kept = cache.resume(key, items) if key is not None else None
    if kept is not None and kept[0] == len(items):
        return kept[1]
    value = build()
    if key is not None and frozen_run(items, 0) == len(items):
        cache.store(key, items, value)
    return value
