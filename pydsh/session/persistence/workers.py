"""Worker threads for the blocking writes of session logs, cheaper per call than ``asyncio.to_thread``.

Every flush barrier of every session (three or more per step) sends one log write to a thread and back.
``asyncio.to_thread`` spends about twice the CPU of the write's own crossing on that: a context copy, the
executor's bookkeeping and two futures chained across threads. Here a call is one queue put, and its outcome
one callback on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


class Workers:
    """Up to ``size`` daemon threads running blocking calls in arrival order, started as calls need them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.threads: list[threading.Thread] = []
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        """One token per thread waiting for a call."""

    async def run(self, call: Callable[[], T]) -> T:
        """``call()`` on a worker thread; its exception is raised here. A cancelled caller leaves the call running."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._idle.acquire(blocking=False) and len(self.threads) < self.size:
            thread = threading.Thread(target=self._serve, name=f"pydsh-log-{len(self.threads)}", daemon=True)
            self.threads.append(thread)
            thread.start()
        self._calls.put((loop, future, call))
        return await future

    def close(self) -> None:
        """Let every thread end once the calls queued before are done."""
        for _ in self.threads:
            self._calls.put(None)
        self.threads = []

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            self._answer(*item)
            del item  # a thread waiting for its next call holds nothing of the last (a 16 MB log batch, say)

    def _answer(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], call: Callable[[], Any]) -> None:
        """Run one call and hand its outcome to the caller's loop."""
        try:
            outcome: tuple[bool, Any] = (True, call())
        except BaseException as exc:
            outcome = (False, exc)
        self._idle.release()  # before the caller learns the outcome, so its next call finds this thread idle
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, *outcome)


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
