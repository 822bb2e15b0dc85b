"""Fibers and their effect stacks (spec 01 §4.2, §5).

A fiber is one loaded plugin instance. Everything it registers is an *effect*: a teardown
pushed onto its stack and run in reverse order when the fiber unloads (P4). Effects can also
be disposed early through the :class:`Disposer` that registering them returned.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any

from pydsh.kernel.errors import KernelError

if TYPE_CHECKING:
    from pydsh.kernel.context import Context

Teardown = Callable[[], Any]

PENDING, LOADING, ACTIVE, DISPOSING, DISPOSED, FAILED = (
    "pending",
    "loading",
    "active",
    "disposing",
    "disposed",
    "failed",
)


class _Done:
    """Awaitable no-op: what a disposer returns when its teardown was synchronous."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


DONE = _Done()


class Disposer:
    """Runs one effect's teardown early; calling it again is a no-op.

    ``disposer()`` runs a synchronous teardown at once; ``await disposer()`` also covers
    asynchronous ones.
    """

    __slots__ = ("_fiber", "_key")

    def __init__(self, fiber: Fiber, key: int) -> None:
        self._fiber = fiber
        self._key = key

    def __call__(self) -> Awaitable[Any]:
        teardown = self._fiber._effects.pop(self._key, None)
        if teardown is None:
            return DONE
        result = teardown()
        return result if inspect.isawaitable(result) else DONE


class Fiber:
    """One plugin instance: its state, validated config, context and effect stack."""

    def __init__(self, row_id: str, plugin_name: str, parent: Fiber | None) -> None:
        self.row_id = row_id
        self.plugin_name = plugin_name
        self.parent = parent
        self.state = PENDING
        self.config: Any = None
        self.instance: Any = None
        self.error: BaseException | None = None
        self.children: list[Fiber] = []
        self.ctx: Context | None = None
        self.source = ""
        self._effects: dict[int, Teardown] = {}
        self._next_key = 0
        if parent is not None:
            parent.children.append(self)

    def __repr__(self) -> str:
        return f"<Fiber {self.row_id} ({self.plugin_name}) {self.state}>"

    @property
    def accepts_effects(self) -> bool:
        return self.state not in (DISPOSING, DISPOSED)

    def push(self, teardown: Teardown) -> Disposer:
        if not self.accepts_effects:
            raise KernelError("INACTIVE_EFFECT", f"fiber {self.row_id} is {self.state}")
        key = self._next_key
        self._next_key += 1
        self._effects[key] = teardown
        return Disposer(self, key)

    async def unwind(self) -> list[Exception]:
        """Run every effect in reverse order, collecting (not raising) failures."""
        errors: list[Exception] = []
        while self._effects:
            _key, teardown = self._effects.popitem()
            try:
                result = teardown()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                errors.append(exc)
        return errors


def teardown_of(result: object) -> Teardown | None:
    """Interpret what an effect's ``execute`` returned (synchronous forms only)."""
    if result is None:
        return None
    if isinstance(result, Generator):
        callables = [c for c in result if c is not None]

        return lambda: _run_reversed(callables)
    if isinstance(result, AbstractContextManager):
        cm = result
        cm.__enter__()
        return lambda: cm.__exit__(None, None, None)
    if callable(result):
        return result
    raise TypeError(f"effect returned {type(result).__name__}; expected a teardown callable")


async def async_teardown_of(result: object) -> Teardown | None:
    """Like :func:`teardown_of`, also accepting awaitables and async forms."""
    if isinstance(result, AsyncGenerator):
        callables = [c async for c in result if c is not None]
        return lambda: _run_reversed(callables)
    if isinstance(result, AbstractAsyncContextManager):
        acm = result
        await acm.__aenter__()
        return lambda: acm.__aexit__(None, None, None)
    if inspect.isawaitable(result):
        return await async_teardown_of(await result)
    return teardown_of(result)


def _run_reversed(callables: list[Callable[[], Any]]) -> Any:
    """Call ``callables`` last-first; continue asynchronously once one returns an awaitable."""
    rest = list(reversed(callables))
    while rest:
        result = rest.pop(0)()
        if inspect.isawaitable(result):
            return _finish(result, rest)
    return None


async def _finish(first: Awaitable[Any], rest: list[Callable[[], Any]]) -> None:
    await first
    for fn in rest:
        result = fn()
        if inspect.isawaitable(result):
            await result
