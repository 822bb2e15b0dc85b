"""Dispatch modes, listener order, prepend, waterfall short-circuit and scope admission."""

from __future__ import annotations

import asyncio
import logging

import pytest

from pydsh.kernel import Kernel, create_scope, define_event
from pydsh.kernel.scope import bind_scope_parent

define_event("test/emit", "emit")
define_event("test/parallel", "parallel")
define_event("test/serial", "serial")
define_event("test/bail", "bail")
define_event("test/waterfall", "waterfall")


def test_undeclared_or_wrong_mode_raises() -> None:
    k = Kernel()
    with pytest.raises(TypeError):
        k.ctx.emit("test/nope")
    with pytest.raises(TypeError):
        k.ctx.emit("test/serial")
    with pytest.raises(TypeError):
        define_event("test/emit", "serial")


async def test_emit_contains_listener_errors(caplog: pytest.LogCaptureFixture) -> None:
    k = Kernel()
    seen: list[int] = []

    def bad(x: int) -> None:
        raise RuntimeError("boom")

    async def bad_async(x: int) -> None:
        raise RuntimeError("async boom")

    k.ctx.on("test/emit", bad)
    k.ctx.on("test/emit", bad_async)
    k.ctx.on("test/emit", seen.append)
    with caplog.at_level(logging.WARNING):
        k.ctx.emit("test/emit", 1)
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

    k.ctx.on("test/parallel", slow)
    k.ctx.on("test/parallel", failing)
    with pytest.raises(ValueError, match="first"):
        await k.ctx.parallel("test/parallel")
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
        k.ctx.on("test/serial", fn)
    assert await k.ctx.serial("test/serial") == "stop"
    assert calls == ["a", "b"]
    k.ctx.on("test/bail", lambda: False)
    k.ctx.on("test/bail", lambda: 7)
    assert k.ctx.bail("test/bail") == 7


async def test_waterfall_order_prepend_and_short_circuit() -> None:
    k = Kernel()
    trace: list[str] = []

    def mw(tag: str):  # type: ignore[no-untyped-def]
        async def listener(payload: list[str], nxt):  # type: ignore[no-untyped-def]
            trace.append(f"{tag}>")
            result = await nxt()
            trace.append(f"<{tag}")
            return f"{tag}({result})"

        return listener

    k.ctx.on("test/waterfall", mw("b"))
    k.ctx.on("test/waterfall", mw("c"))
    k.ctx.on("test/waterfall", mw("a"), prepend=True)
    result = await k.ctx.waterfall("test/waterfall", [], lambda: "default")
    assert result == "a(b(c(default)))"
    assert trace == ["a>", "b>", "c>", "<c", "<b", "<a"]

    async def veto(payload: object, nxt):  # type: ignore[no-untyped-def]
        return "vetoed"

    k.ctx.on("test/waterfall", veto, prepend=True)
    trace.clear()
    assert await k.ctx.waterfall("test/waterfall", [], lambda: "default") == "vetoed"
    assert trace == []


async def test_scope_admission_rules() -> None:
    k = Kernel()
    preset, agent, other = object(), object(), object()
    bind_scope_parent(k.ctx, agent, preset)
    preset_scope = create_scope(k.ctx, preset)
    agent_scope = create_scope(k.ctx, agent, preset)
    seen: list[str] = []
    k.ctx.on("test/emit", lambda: seen.append("untagged"))
    preset_scope.ctx.on("test/emit", lambda: seen.append("preset"))
    agent_scope.ctx.on("test/emit", lambda: seen.append("agent"))
    agent_scope.ctx.on("test/emit", lambda: seen.append("global"), global_=True)

    k.ctx.emit("test/emit", scope=None)
    assert seen == ["untagged", "global"]
    seen.clear()
    k.ctx.emit("test/emit", scope=agent)
    assert seen == ["untagged", "preset", "agent", "global"]
    seen.clear()
    k.ctx.emit("test/emit", scope=other)
    assert seen == ["untagged", "global"]
    seen.clear()
    await agent_scope.dispose()
    k.ctx.emit("test/emit", scope=agent)
    assert seen == ["untagged"]


def test_scope_cycles_rejected() -> None:
    k = Kernel()
    a, b = object(), object()
    binding = bind_scope_parent(k.ctx, a, b)
    with pytest.raises(ValueError, match="cycle"):
        bind_scope_parent(k.ctx, b, a)
    binding.rebind(None)
    bind_scope_parent(k.ctx, b, a)
