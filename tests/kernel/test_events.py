"""Dispatch modes, declared listener order (with cycles refused), waterfall short-circuit and scope admission."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref

import pytest

from pydsh.kernel import Kernel, KernelError, create_scope
from pydsh.kernel.events import Bail, Emit, Next, Parallel, Serial, Waterfall, declared_events
from pydsh.kernel.scope import bind_scope_parent

EMIT: Emit[int] = Emit("test/emit")
BARE: Emit[()] = Emit("test/bare")
PARALLEL: Parallel[()] = Parallel("test/parallel")
SERIAL: Serial[(), str] = Serial("test/serial")
BAIL: Bail[(), int] = Bail("test/bail")
WATERFALL: Waterfall[list[str], str] = Waterfall("test/waterfall")
ORDERED: Waterfall[list[str], str] = Waterfall("test/ordered", order=("first", "second", "third"))


def test_an_event_is_declared_once() -> None:
    with pytest.raises(TypeError, match="already declared"):
        Serial("test/emit")
    with pytest.raises(TypeError, match="already declared"):
        Emit("test/emit")
    assert EMIT in declared_events()


async def test_emit_contains_listener_errors(caplog: pytest.LogCaptureFixture) -> None:
    k = Kernel()
    seen: list[int] = []

    def bad(x: int) -> None:
        raise RuntimeError("boom")

    async def bad_async(x: int) -> None:
        raise RuntimeError("async boom")

    k.ctx.on(EMIT, bad)
    k.ctx.on(EMIT, bad_async)
    k.ctx.on(EMIT, seen.append)
    with caplog.at_level(logging.WARNING):
        k.ctx.emit(EMIT, 1)
        await asyncio.sleep(0.01)
    assert seen == [1]
    assert sum("test/emit" in r.getMessage() for r in caplog.records) == 2


async def test_parallel_runs_all_then_raises_first() -> None:
    k = Kernel()
    done: list[str] = []

    async def slow() -> None:
        await asyncio.sleep(0.01)
        done.append("slow")

    async def failing() -> None:
        raise ValueError("first")

    k.ctx.on(PARALLEL, slow)
    k.ctx.on(PARALLEL, failing)
    with pytest.raises(ValueError, match="first"):
        await k.ctx.parallel(PARALLEL)
    assert done == ["slow"]


async def test_serial_stops_at_bail_value_and_bail_is_sync() -> None:
    k = Kernel()
    calls: list[str] = []

    async def a() -> None:
        calls.append("a")

    async def b() -> str:
        calls.append("b")
        return "stop"

    async def c() -> None:
        calls.append("c")

    for fn in (a, b, c):
        k.ctx.on(SERIAL, fn)
    assert await k.ctx.serial(SERIAL) == "stop"
    assert calls == ["a", "b"]
    k.ctx.on(BAIL, lambda: None)
    k.ctx.on(BAIL, lambda: 7)
    assert k.ctx.bail(BAIL) == 7


def wrapper(tag: str, trace: list[str]):  # type: ignore[no-untyped-def]
    async def listener(payload: list[str], nxt: Next[str]) -> str:
        trace.append(f"{tag}>")
        result = await nxt()
        trace.append(f"<{tag}")
        return f"{tag}({result})"

    return listener


async def test_waterfall_order_constraints_and_short_circuit() -> None:
    k = Kernel()
    trace: list[str] = []
    k.ctx.on(WATERFALL, wrapper("b", trace), name="b")
    k.ctx.on(WATERFALL, wrapper("c", trace), name="c")
    k.ctx.on(WATERFALL, wrapper("a", trace), name="a", before=("b",))
    result = await k.ctx.waterfall(WATERFALL, [], lambda: "default")
    assert result == "a(b(c(default)))"
    assert trace == ["a>", "b>", "c>", "<c", "<b", "<a"]

    async def veto(payload: list[str], nxt: Next[str]) -> str:
        return "vetoed"

    k.ctx.on(WATERFALL, veto, name="veto", before=("a",))
    trace.clear()
    assert await k.ctx.waterfall(WATERFALL, [], lambda: "default") == "vetoed"
    assert trace == []


class _Payload(list[str]):
    """A payload a weak reference can watch."""


async def test_a_waterfall_leaves_no_reference_cycle_behind() -> None:
    """Its payload is freed as soon as the dispatch ends, without the cyclic collector (which a paced
    server runs rarely, over new objects only)."""
    k = Kernel()
    trace: list[str] = []
    k.ctx.on(WATERFALL, wrapper("a", trace), name="a")
    k.ctx.on(WATERFALL, wrapper("b", trace), name="b")
    payload = _Payload()
    freed = weakref.ref(payload)
    gc.disable()
    try:
        assert await k.ctx.waterfall(WATERFALL, payload, lambda: "default") == "a(b(default))"
        del payload
        assert freed() is None
    finally:
        gc.enable()


async def test_declared_order_wins_over_registration_order() -> None:
    k = Kernel()
    trace: list[str] = []
    k.ctx.on(ORDERED, wrapper("third", trace), name="third")
    k.ctx.on(ORDERED, wrapper("loose", trace), name="loose")
    k.ctx.on(ORDERED, wrapper("first", trace), name="first")
    k.ctx.on(ORDERED, wrapper("late", trace), name="late", after=("third",))
    k.ctx.on(ORDERED, wrapper("second", trace), name="second")
    names = [entry.name for entry in k.runtime.bus.listeners(ORDERED)]
    assert names == ["first", "second", "third", "loose", "late"]
    assert await k.ctx.waterfall(ORDERED, [], lambda: "x") == "first(second(third(loose(late(x)))))"


def test_a_contradictory_order_is_refused_and_changes_nothing() -> None:
    k = Kernel()
    trace: list[str] = []
    k.ctx.on(ORDERED, wrapper("second", trace), name="second")
    k.ctx.on(ORDERED, wrapper("first", trace), name="first")
    k.ctx.on(ORDERED, wrapper("x", trace), name="x", after=("second",))
    with pytest.raises(KernelError) as caught:
        k.ctx.on(ORDERED, wrapper("y", trace), name="y", before=("first",), after=("x",))
    assert caught.value.code == "EVENT_ORDER"
    assert "test/ordered: contradictory listener order" in str(caught.value)
    assert "first -> second -> x -> y -> first" in str(caught.value)
    assert [entry.name for entry in k.runtime.bus.listeners(ORDERED)] == ["first", "second", "x"]


def test_a_listener_is_named_after_its_plugin_row_by_default() -> None:
    k = Kernel()
    k.ctx.on(EMIT, lambda x: None)
    assert [entry.name for entry in k.runtime.bus.listeners(EMIT)] == [k.ctx.fiber.row_id]


async def test_scope_admission_rules() -> None:
    k = Kernel()
    preset, agent, other = object(), object(), object()
    bind_scope_parent(k.ctx, agent, preset)
    preset_scope = create_scope(k.ctx, preset)
    agent_scope = create_scope(k.ctx, agent, preset)
    seen: list[str] = []
    k.ctx.on(BARE, lambda: seen.append("untagged"))
    preset_scope.ctx.on(BARE, lambda: seen.append("preset"))
    agent_scope.ctx.on(BARE, lambda: seen.append("agent"))
    agent_scope.ctx.on(BARE, lambda: seen.append("global"), global_=True)

    k.ctx.emit(BARE, scope=None)
    assert seen == ["untagged", "global"]
    seen.clear()
    k.ctx.emit(BARE, scope=agent)
    assert seen == ["untagged", "preset", "agent", "global"]
    seen.clear()
    k.ctx.emit(BARE, scope=other)
    assert seen == ["untagged", "global"]
    seen.clear()
    await agent_scope.dispose()
    k.ctx.emit(BARE, scope=agent)
    assert seen == ["untagged"]


async def test_an_event_about_a_disposed_scope_does_not_keep_its_key() -> None:
    """An agent's disposal is emitted in its own scope after that scope is gone: the kernel must not hold
    the agent (and its whole session) from then on."""

    class Key:
        pass

    k = Kernel()
    parent, root, child = Key(), Key(), Key()
    k.ctx.on(BARE, lambda: None)
    for key, above in ((root, None), (child, parent)):
        scope = create_scope(k.ctx, key, above)
        k.ctx.emit(BARE, scope=key)
        await scope.dispose()
        k.ctx.emit(BARE, scope=key)
    gone = [weakref.ref(root), weakref.ref(child)]
    del root, child, scope, key
    gc.collect()  # a scope and its context refer to each other
    assert [ref() for ref in gone] == [None, None]


def test_scope_cycles_rejected() -> None:
    k = Kernel()
    a, b = object(), object()
    binding = bind_scope_parent(k.ctx, a, b)
    with pytest.raises(ValueError, match="cycle"):
        bind_scope_parent(k.ctx, b, a)
    binding.rebind(None)
    bind_scope_parent(k.ctx, b, a)
