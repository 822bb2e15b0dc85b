"""Abort signals with typed reasons, bridged to asyncio task cancellation (spec 03 §9.3).

``async with signal.scope():`` cancels the awaits inside the block when the signal fires and
raises :class:`AbortError` carrying the reason instead of ``CancelledError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

from pydsh.kernel.errors import PydshError


class AbortError(PydshError):
    """Raised where work stops because its signal was aborted; ``reason`` is the signal's."""

    def __init__(self, reason: object = None) -> None:
        self.reason = reason
        super().__init__("operation aborted")


class AbortSignal:
    """Read side of an :class:`AbortController`."""

    __slots__ = ("_aborted", "_reason", "_callbacks", "_future")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._callbacks: list[Callable[[object], None]] = []
        self._future: asyncio.Future[object] | None = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> object:
        return self._reason

    def throw_if_aborted(self) -> None:
        if self._aborted:
            raise AbortError(self._reason)

    def add_callback(self, fn: Callable[[object], None]) -> Callable[[], None]:
        """Call ``fn(reason)`` when aborted (at once if already aborted); returns a remover."""
        if self._aborted:
            fn(self._reason)
            return _noop
        self._callbacks.append(fn)

        def remove() -> None:
            if fn in self._callbacks:
                self._callbacks.remove(fn)

        return remove

    async def wait(self) -> object:
        """Wait until aborted and return the reason."""
        if self._aborted:
            return self._reason
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return await asyncio.shield(self._future)

    @asynccontextmanager
    async def scope(self) -> AsyncIterator[None]:
        """Cancel the enclosed awaits when the signal fires; surface it as ``AbortError``."""
        self.throw_if_aborted()
        task = asyncio.current_task()
        assert task is not None
        fired = False

        def on_abort(_reason: object) -> None:
            nonlocal fired
            fired = True
            task.cancel()

        remove = self.add_callback(on_abort)
        try:
            yield
        except asyncio.CancelledError:
            if fired:
                task.uncancel()
                raise AbortError(self._reason) from None
            raise
        finally:
            remove()

    def _fire(self, reason: object) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(reason)
        if self._future is not None and not self._future.done():
            self._future.set_result(reason)

    @staticmethod
    def any(signals: Iterable[AbortSignal]) -> AbortSignal:
        """A signal that aborts with the first reason of any of ``signals``."""
        controller = AbortController()
        for s in signals:
            s.add_callback(controller.abort)
        return controller.signal

    @staticmethod
    def timeout(seconds: float, reason: object = "timeout") -> AbortSignal:
        controller = AbortController()
        asyncio.get_running_loop().call_later(seconds, controller.abort, reason)
        return controller.signal


class AbortController:
    """Write side: ``abort(reason)`` fires the signal once; later calls are ignored."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        self.signal._fire(reason)


def _noop() -> None:
    return None


NEVER = AbortSignal()
"""A signal that is never aborted, for callers that have none."""
