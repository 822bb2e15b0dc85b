"""The worker threads of log writes: outcomes come back to the caller, calls overlap up to the size, no more."""

from __future__ import annotations

import asyncio
import threading
import weakref

import pytest

from pydsh.session.persistence.workers import Workers

SAFETY_S = 30.0


async def test_results_and_exceptions_come_back_to_the_caller() -> None:
    workers = Workers(2)

    def fail() -> None:
        raise OSError("disk full")

    assert await workers.run(lambda: threading.current_thread().name) == "pydsh-log-0"
    with pytest.raises(OSError, match="disk full"):
        await workers.run(fail)
    assert await workers.run(lambda: 42) == 42
    assert len(workers.threads) == 1
    workers.close()


async def test_blocked_calls_overlap_up_to_the_size_and_a_cancelled_caller_leaves_the_threads_working() -> None:
    workers = Workers(2)
    release = threading.Event()
    started = threading.Semaphore(0)

    def block() -> str:
        started.release()
        release.wait(SAFETY_S)
        return "done"

    first = asyncio.ensure_future(workers.run(block))
    second = asyncio.ensure_future(workers.run(block))
    third = asyncio.ensure_future(workers.run(lambda: "queued"))
    assert await asyncio.to_thread(started.acquire, True, SAFETY_S)
    assert await asyncio.to_thread(started.acquire, True, SAFETY_S)
    assert len(workers.threads) == 2 and not third.done()
    first.cancel()
    release.set()
    assert await asyncio.wait_for(asyncio.gather(second, third), SAFETY_S) == ["done", "queued"]
    assert await workers.run(lambda: "after") == "after"
    workers.close()


async def test_a_thread_waiting_for_its_next_call_holds_nothing_of_the_last() -> None:
    """The last call of a thread (a log batch of megabytes, bound into it) is freed once it has answered."""
    workers = Workers(1)

    class Batch:
        def __call__(self) -> int:
            return 7

    batch = Batch()
    gone = weakref.ref(batch)
    assert await workers.run(batch) == 7
    del batch
    for _ in range(100):  # the thread lets go right after it has handed the outcome over
        if gone() is None:
            break
        await asyncio.sleep(0.01)
    assert gone() is None
    workers.close()
