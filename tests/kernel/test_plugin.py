"""Fibers, effects, inject-gated activation, reloads, failed starts and config validation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pydsh.kernel import Kernel, KernelError
from pydsh.kernel.compose import Row
from pydsh.kernel.fiber import ACTIVE, FAILED, PENDING, Fiber
from pydsh.kernel.keys import ServiceKey
from tests.kernel import sample_plugins
from tests.kernel.sample_plugins import LOG

P = "tests.kernel.sample_plugins"


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    LOG.clear()


def row(row_id: str, attr: str, config: Any = None) -> Row:
    return Row(id=row_id, name=f"{P}:{attr}", config=config)


async def test_effects_unwind_lifo_and_disposer_runs_once() -> None:
    k = Kernel()
    order: list[str] = []
    k.ctx.effect(lambda: lambda: order.append("first"))
    d = k.ctx.effect(lambda: lambda: order.append("second"))

    def gen():  # type: ignore[no-untyped-def]
        yield lambda: order.append("gen-a")
        yield lambda: order.append("gen-b")

    k.ctx.effect(gen)
    k.ctx.effect(lambda: lambda: order.append("third"))
    d()
    d()
    assert order == ["second"]
    await k.dispose()
    assert order == ["second", "third", "gen-b", "gen-a", "first"]


async def test_effect_on_disposed_fiber_is_rejected() -> None:
    k = Kernel()
    await k.dispose()
    with pytest.raises(KernelError) as info:
        k.ctx.effect(lambda: None)
    assert info.value.code == "INACTIVE_EFFECT"


async def test_async_effect_forms() -> None:
    k = Kernel()
    order: list[str] = []

    class CM:
        async def __aenter__(self) -> None:
            order.append("enter")

        async def __aexit__(self, *exc: object) -> None:
            order.append("exit")

    await k.ctx.async_effect(CM)

    async def returns_teardown():  # type: ignore[no-untyped-def]
        async def undo() -> None:
            order.append("undo")

        return undo

    await k.ctx.async_effect(returns_teardown)
    await k.dispose()
    assert order == ["enter", "undo", "exit"]


async def test_duplicate_and_missing_service() -> None:
    k = Kernel()
    k.ctx.provide(ServiceKey("a"), 1)
    with pytest.raises(KernelError) as info:
        k.ctx.provide(ServiceKey("a"), 2)
    assert info.value.code == "DUPLICATE_SERVICE"
    assert k.ctx.get(ServiceKey("b")) is None
    with pytest.raises(KernelError) as info:
        k.ctx.require(ServiceKey("b"))
    assert info.value.code == "MISSING_SERVICE"


async def test_inject_gates_activation_regardless_of_row_order() -> None:
    k = Kernel()
    await k.load([row("consumer", "consumer"), row("provider", "provider", {"word": "yo"})])
    assert LOG == ["provider:yo", "consumer:yo"]


async def test_dependents_unload_when_service_goes_and_reload_when_replaced() -> None:
    k = Kernel()
    await k.load([row("provider", "provider"), row("consumer", "consumer")])
    consumer = next(f for f in k.fiber.children if f.row_id == "consumer")
    provider = next(f for f in k.fiber.children if f.row_id == "provider")
    LOG.clear()
    await k.loader.dispose(provider)
    await k.loader.settle()
    assert LOG == ["provider:down", "consumer:down"]
    assert consumer.state == PENDING
    LOG.clear()
    k.ctx.provide(ServiceKey("echo"), "again")
    await k.loader.settle()
    assert LOG == ["consumer:again"]
    assert consumer.state == ACTIVE


async def test_failed_start_rolls_back_and_spares_other_rows() -> None:
    k = Kernel()
    await k.load([row("boom", "exploding"), row("provider", "provider")])
    boom = next(f for f in k.fiber.children if f.row_id == "boom")
    assert boom.state == FAILED
    assert "exploding:rollback" in LOG
    assert k.ctx.get(ServiceKey("half")) is None
    assert k.ctx.get(ServiceKey("echo")) == "hi"


async def test_unknown_plugin_and_invalid_config_fail_their_row_only() -> None:
    k = Kernel()
    await k.load(
        [
            Row(id="ghost", name="no-such-plugin"),
            row("bad", "provider", {"word": "x", "typo": 1}),
            row("counter", "Counter"),
        ]
    )
    states = {f.row_id: f for f in k.fiber.children}
    assert states["ghost"].state == FAILED
    assert isinstance(states["ghost"].error, KernelError)
    assert states["ghost"].error.code == "PLUGIN_NOT_FOUND"
    err = states["bad"].error
    assert isinstance(err, KernelError) and err.code == "CONFIG_INVALID"
    assert 'row "bad"' in str(err) and "typo" in str(err)
    assert states["counter"].state == ACTIVE
    assert LOG == ["counter:init", "counter:start"]
    assert isinstance(k.ctx.require(ServiceKey("counter")), sample_plugins.Counter)


async def test_config_coercion_from_interpolated_strings() -> None:
    k = Kernel()
    await k.load([row("p", "provider", {"word": "w", "ratio": "0.8"})])
    fiber: Fiber = k.fiber.children[0]
    assert fiber.config.ratio == 0.8


async def test_group_isolate_gives_each_group_its_own_realm() -> None:
    k = Kernel()
    group = lambda gid: Row(  # noqa: E731
        id=gid,
        name="pydsh:group",
        isolate={"echo": True},
        children=[row(f"{gid}-p", "provider", {"word": gid}), row(f"{gid}-c", "consumer")],
    )
    await k.load([group("g1"), group("g2")])
    assert sorted(LOG) == sorted(["provider:g1", "consumer:g1", "provider:g2", "consumer:g2"])
    assert k.ctx.get(ServiceKey("echo")) is None


async def test_unload_unwinds_children_in_reverse_creation_order() -> None:
    k = Kernel()
    await k.load([row("a", "provider", {"word": "a"}), row("c", "consumer")])
    LOG.clear()
    await k.dispose()
    assert LOG == ["consumer:down", "provider:down"]


async def test_plugin_module_raising_on_import_fails_only_its_row() -> None:
    k = Kernel()
    await k.load([Row(id="broken", name="tests.kernel.broken_plugin"), row("provider", "provider")])
    broken = next(f for f in k.fiber.children if f.row_id == "broken")
    assert broken.state == FAILED
    assert isinstance(broken.error, KernelError) and broken.error.code == "PLUGIN_NOT_FOUND"
    assert "RuntimeError: this plugin cannot be imported" in str(broken.error)
    assert k.ctx.get(ServiceKey("echo")) == "hi"


async def test_isolate_labels_share_a_realm_and_unlabelled_ones_do_not() -> None:
    k = Kernel()
    a = k.ctx.isolate("svc", "shared")
    b = k.ctx.isolate("svc", "shared")
    c = k.ctx.isolate("svc")
    a.provide(ServiceKey("svc"), 1)
    assert b.get(ServiceKey("svc")) == 1
    assert c.get(ServiceKey("svc")) is None
    assert k.ctx.get(ServiceKey("svc")) is None


async def test_a_plugin_calling_sys_exit_fails_only_its_row(caplog: pytest.LogCaptureFixture) -> None:
    k = Kernel()
    rows = [Row(id="exits", name="tests.kernel.exiting_plugin"), row("quits", "exiting"), row("provider", "provider")]
    await k.load(rows)
    states = {f.row_id: f for f in k.fiber.children}
    assert states["exits"].state == FAILED and states["quits"].state == FAILED
    assert "SystemExit: called sys.exit(7)" in str(states["exits"].error)
    assert str(states["quits"].error) == "SystemExit: called sys.exit(3)" and "exiting:rollback" in LOG
    assert k.ctx.get(ServiceKey("echo")) == "hi"
    failed = [r.getMessage() for r in caplog.records if r.name == "pydsh.kernel"]
    assert failed == [
        'plugin row "exits" (tests.kernel.exiting_plugin) failed: KernelError: PLUGIN_NOT_FOUND: '
        "tests.kernel.exiting_plugin (SystemExit: called sys.exit(7)) <- SystemExit: called sys.exit(7)",
        f'plugin row "quits" ({P}:exiting) failed: PluginAborted: SystemExit: called sys.exit(3)',
    ]


async def test_a_stray_cancelled_error_fails_its_row_but_a_real_cancellation_propagates() -> None:
    k = Kernel()
    await k.load([row("stray", "stray_cancel"), row("provider", "provider")])
    stray = next(f for f in k.fiber.children if f.row_id == "stray")
    assert stray.state == FAILED and k.ctx.get(ServiceKey("echo")) == "hi"
    with pytest.raises(asyncio.CancelledError):
        await Kernel().load([row("cancelled", "cancels_its_loader")])


@pytest.mark.parametrize("target", ["tests.kernel.interrupted_plugin", f"{P}:interrupted"])
def test_ctrl_c_while_a_plugin_imports_or_starts_still_stops_the_load(target: str) -> None:
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(Kernel().load([Row(id="interrupted", name=target)]))


async def test_a_plugin_naming_a_dependency_by_string_fails_its_row_saying_so() -> None:
    k = Kernel()
    await k.load([row("provider", "provider"), row("stringly", "stringly")])
    (failure,) = k.loader.failures
    assert failure.row_id == "stringly"
    assert isinstance(failure.error, KernelError) and failure.error.code == "COMPOSITION_INVALID"
    assert "inject and optional list service keys (pydsh.plugin.ServiceKey), not 'echo'" in str(failure.error)
    assert k.ctx.get(ServiceKey("echo")) == "hi"
