"""Requests jump the queue: `hurry` and `call_first_threadsafe` run their work ahead of the callbacks
already waiting on the loop, in order, and lose nothing when they cannot."""

from __future__ import annotations

import asyncio
import threading

from pydsh.apps.stdio import call_first_threadsafe, hurry

WAITING = 50


def _queue_callbacks(loop: asyncio.AbstractEventLoop, ran: list[str]) -> None:
    for n in range(WAITING):
        loop.call_soon(ran.append, f"cb{n}")


async def _drain() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _record(ran: list[str], name: str) -> None:
    ran.append(name)


def test_hurried_tasks_run_before_waiting_callbacks_in_their_order() -> None:
    async def main() -> list[str]:
        ran: list[str] = []
        _queue_callbacks(asyncio.get_running_loop(), ran)
        first = asyncio.ensure_future(_record(ran, "first"))
        second = asyncio.ensure_future(_record(ran, "second"))
        hurry(first, second)
        await _drain()
        return ran

    ran = asyncio.run(main())
    assert ran[:2] == ["first", "second"]
    assert ran[2:] == [f"cb{n}" for n in range(WAITING)]


def test_hurry_leaves_the_order_alone_when_the_tasks_are_not_the_newest() -> None:
    async def main() -> list[str]:
        ran: list[str] = []
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(_record(ran, "task"))
        _queue_callbacks(loop, ran)
        hurry(task)
        await _drain()
        return ran

    ran = asyncio.run(main())
    assert ran == ["task", *(f"cb{n}" for n in range(WAITING))]


def test_a_woken_task_is_hurried_too() -> None:
    async def main() -> list[str]:
        ran: list[str] = []
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str] = asyncio.Queue()

        async def reader() -> None:
            ran.append(await queue.get())

        task = asyncio.ensure_future(reader())
        await asyncio.sleep(0)  # the reader now waits on the queue
        _queue_callbacks(loop, ran)
        queue.put_nowait("woken")
        hurry(task)
        await _drain()
        return ran

    ran = asyncio.run(main())
    assert ran[0] == "woken"
    assert len(ran) == WAITING + 1


def test_a_callback_from_another_thread_runs_right_after_the_running_one() -> None:
    async def main() -> list[str]:
        ran: list[str] = []
        loop = asyncio.get_running_loop()
        handed = threading.Event()

        def from_thread() -> None:
            call_first_threadsafe(loop, ran.append, "from thread")
            handed.set()

        def running() -> None:
            ran.append("running")
            threading.Thread(target=from_thread).start()
            assert handed.wait(5)

        loop.call_soon(running)
        _queue_callbacks(loop, ran)
        await _drain()
        return ran

    ran = asyncio.run(main())
    assert ran[:2] == ["running", "from thread"]
    assert ran[2:] == [f"cb{n}" for n in range(WAITING)]


def test_callbacks_handed_first_all_run_once_the_loop_is_busy() -> None:
    async def main() -> list[int]:
        ran: list[int] = []
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def hand_over() -> None:
            for n in range(200):
                call_first_threadsafe(loop, ran.append, n)
            call_first_threadsafe(loop, done.set)

        thread = threading.Thread(target=hand_over)
        thread.start()
        while not done.is_set():
            loop.call_soon(lambda: None)
            await asyncio.sleep(0)
        thread.join()
        return ran

    assert sorted(asyncio.run(main())) == list(range(200))


def test_a_later_hurry_queues_behind_the_tasks_hurried_before() -> None:
    """Same-session prompts are admitted in arrival order (spec 06): a request of a later chunk must not
    start before one of an earlier chunk that has not started yet."""

    async def main() -> list[str]:
        ran: list[str] = []
        _queue_callbacks(asyncio.get_running_loop(), ran)
        earlier = asyncio.ensure_future(_record(ran, "earlier"))
        hurry(earlier)
        later = asyncio.ensure_future(_record(ran, "later"))
        hurry(later)
        await _drain()
        return ran

    ran = asyncio.run(main())
    assert ran[:2] == ["earlier", "later"]


def test_hurry_behind_a_callback_of_an_unhashable_object_loses_nothing() -> None:
    """A callback bound to an unhashable object (a dataclass, say) is at the front: looking it up among the
    hurried tasks must not raise with the task's step taken out of the queue (the task would never run)."""

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __init__(self, ran: list[str]) -> None:
            self.ran = ran

        def note(self) -> None:
            self.ran.append("unhashable")

    async def main() -> list[str]:
        ran: list[str] = []
        asyncio.get_running_loop().call_soon(Unhashable(ran).note)
        task = asyncio.ensure_future(_record(ran, "task"))
        hurry(task)
        await asyncio.wait({task}, timeout=1)
        return ran

    loop = asyncio.new_event_loop()  # not asyncio.run: cancelling a task whose step was lost waits forever
    try:
        assert sorted(loop.run_until_complete(main())) == ["task", "unhashable"]
    finally:
        loop.close()
