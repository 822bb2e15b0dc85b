"""The paced cyclic collector: survivors of full collections are frozen, frozen cycles are freed by a thaw
(on idle, on growth, on ``collect``), and everything is undone when the pacing ends."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import pydsh.testing
from pydsh.host import collector, launch
from pydsh.host.collector import FULL_EVERY, MIDDLE_EVERY, Pacer, paced


class Node:
    """A container that can sit in a reference cycle and be watched."""

    def __init__(self) -> None:
        self.other: Node | None = None


ALIVE: list[Node] = []
"""What keeps the test's cycles alive until it clears this."""


def cycle() -> weakref.ref[Node]:
    """A two-node reference cycle, kept alive by :data:`ALIVE`."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    ALIVE.append(a)
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    yield
    ALIVE.clear()
    gc.unfreeze()


def frozen_cycle() -> weakref.ref[Node]:
    """A cycle that lived through a full collection (so it is frozen) and then became garbage."""
    ref = cycle()
    gc.collect()
    ALIVE.clear()
    return ref


async def test_a_full_collection_freezes_what_survived_and_leaves_frozen_cycles_to_a_thaw() -> None:
    with paced(lambda: False):
        ref = frozen_cycle()
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert ref() is not None, "a frozen cycle is not walked by later collections"
        assert collector.collect() >= 2
        assert ref() is None


async def test_pacing_ends_with_nothing_frozen_and_the_thresholds_restored() -> None:
    before = gc.get_threshold()
    with paced(lambda: False):
        assert gc.get_threshold() == (before[0], MIDDLE_EVERY, FULL_EVERY)
        frozen_cycle()
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    assert collector._pacer is None


async def test_pacing_does_not_nest() -> None:
    with paced(lambda: False), pytest.raises(RuntimeError, match="already paced"), paced(lambda: True):
        pass


async def test_an_idle_process_walks_the_whole_heap_once_the_frozen_part_grew() -> None:
    idle = False
    with paced(lambda: idle) as pacer:
        ref = frozen_cycle()
        pacer._walked = 1  # the frozen part has grown past any bound
        pacer.check_idle()
        assert ref() is not None, "a busy process is not stalled by a whole walk"
        idle = True
        pacer.check_idle()
        assert ref() is None
        assert pacer._walked >= collector.FLOOR


async def test_a_busy_process_thaws_once_the_frozen_part_outgrew_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    with paced(lambda: False) as pacer:
        ref = frozen_cycle()
        assert ref() is not None
        monkeypatch.setattr(pacer, "_walked", 1)
        gc.collect()  # this collection's survivors take the frozen part past BUSY_GROWTH times the last walk
        gc.collect()  # so this one walks everything, frozen cycle included
        assert ref() is None


async def test_survivors_that_died_since_their_freeze_do_not_bring_a_thaw(monkeypatch: pytest.MonkeyPatch) -> None:
    with paced(lambda: False) as pacer:
        ref = frozen_cycle()
        churn = [Node() for _ in range(50_000)]
        gc.collect()  # the churn is frozen and counted
        del churn  # and freed by reference counting
        really = gc.get_freeze_count()
        monkeypatch.setattr(pacer, "_walked", (really + 1_000) / collector.BUSY_GROWTH)
        assert pacer._frozen > collector.BUSY_GROWTH * pacer._walked, "the running count still holds the churn"
        gc.collect()
        gc.collect()
        assert ref() is not None, "no whole walk: the frozen part did not really outgrow its bound"
        assert pacer._frozen <= collector.BUSY_GROWTH * pacer._walked


async def test_the_timer_asks_whether_the_process_is_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = asyncio.Event()
    monkeypatch.setattr(collector, "IDLE_CHECK_S", 0.01)

    def idle() -> bool:
        asked.set()
        return True

    with paced(idle) as pacer:
        pacer._walked = 0
        pacer._frozen = 1
        await asyncio.wait_for(asked.wait(), 5)


async def test_collect_without_pacing_is_a_full_collection() -> None:
    ref = cycle()
    ALIVE.clear()
    assert collector.collect() >= 2
    assert ref() is None


def test_a_pacer_ignores_collections_of_the_younger_generations() -> None:
    pacer = Pacer(lambda: False)
    pacer.after_collection("stop", {"generation": 1, "collected": 0, "uncollectable": 0})
    pacer.after_collection("start", {"generation": 2, "collected": 0, "uncollectable": 0})
    assert gc.get_freeze_count() == 0


async def test_the_host_is_idle_only_while_no_agent_runs_a_turn(tmp_path: Path) -> None:
    async with pydsh.testing.scripted_host([{"hang": True}], cwd=tmp_path) as host:
        assert host.idle
        agent = await host.create_agent()
        run = agent.prompt("wait forever")
        await anext(run)
        await run.aclose()
        while agent.status != "running":
            await asyncio.sleep(0.01)
        assert not host.idle
        agent.cancel()
        while agent.status == "running":
            await asyncio.sleep(0.01)
        assert host.idle


async def test_an_app_runs_with_the_collector_paced_and_threads_switching_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[int, int, int]] = []
    switch: list[float] = []
    before = sys.getswitchinterval()

    class App:
        async def run(self, host: object, args: list[str]) -> int:
            seen.append(gc.get_threshold())
            switch.append(sys.getswitchinterval())
            return 7

    async def close() -> None:
        return None

    host = SimpleNamespace(idle=True, ctx=SimpleNamespace(require=lambda key: App()), close=close)

    async def started(profile: str, rows: object) -> SimpleNamespace:
        return host

    monkeypatch.setattr(launch, "started", started)
    assert await launch.serve("headless", [], []) == 7
    assert seen[0][2] == FULL_EVERY
    assert collector._pacer is None
    assert switch == [launch.SWITCH_INTERVAL_S] and sys.getswitchinterval() == before
