"""The token meter: fixed heuristic, usage anchor, config refusal and the three projection units."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pydsh.agent.keys import AGENT_PRESETS
from pydsh.compaction import meter as meter_module
from pydsh.compaction.heuristic import (
    estimate_message,
    price_block,
    price_system,
    tools_tokens,
)
from pydsh.compaction.keys import TOKEN_METER
from pydsh.compaction.meter import (
    ContextBreakdownUnit,
    ContextPressureUnit,
    MeterError,
    TokenMeter,
    TokenUsageUnit,
    _MeterFold,
    int_map,
)
from pydsh.kernel.text import utf16_len
from pydsh.session.events import make_header
from pydsh.session.log import Session
from tests.agent.harness import start_host


def ev(seq: int, etype: str, data: dict[str, Any], op: Any = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": etype, "seq": seq, "time": seq, "data": data}
    if op is not None:
        event["surfaceOp"] = op
    return event


def user(seq: int, text: str, op: Any = "append") -> dict[str, Any]:
    return ev(seq, "user/message", {"role": "user", "id": f"u{seq}", "content": [{"type": "text", "text": text}]}, op)


def system(seq: int, text: str, op: Any = "append") -> dict[str, Any]:
    message = {"role": "system", "id": f"s{seq}", "content": [{"type": "text", "text": text}]}
    return ev(seq, "system/message", {"turn": 1, "step": 1, "message": message}, op)


def assistant(seq: int, text: str, usage: dict[str, int] | None, turn: int = 1, step: int = 1) -> dict[str, Any]:
    message = {"role": "assistant", "id": f"a{seq}", "content": [{"type": "text", "text": text}]}
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if usage is not None:
        data["usage"] = usage
    return ev(seq, "assistant/message", data, "append")


def fold(unit: Any, events: list[dict[str, Any]]) -> Any:
    state = unit.init({}, 0)
    for event in events:
        state = unit.apply(state, event)
    return state


# -- heuristic (§2.4) --------------------------------------------------------------------------------


def test_heuristic_prices() -> None:
    assert price_block({"type": "text", "text": "abcde"}) == 2 + 4
    assert price_block({"type": "reasoning", "text": ""}) == 4
    assert price_block({"type": "tool-call", "id": "x", "name": "bash", "arguments": '{"a":1}'}) == 1 + 2 + 4
    image = {"type": "image", "attachment": "ref"}
    assert price_block({**image, "offloaded": True}) == price_block(image) == 4 + 9
    assert estimate_message({"role": "user", "content": [{"type": "text", "text": "abcd"}]}) == 1 + 4 + 4
    assert price_system({"content": []}) == 0
    assert price_system({"content": [{"type": "text", "text": "x" * 9}]}) == 3 + 4
    assert tools_tokens([]) == 0
    assert tools_tokens([{"name": "é"}]) == 4 + 4
    assert utf16_len("a😀") == 3


# -- measure (§2.3) ------------------------------------------------------------------------------------


async def test_measure_anchors_to_reported_usage_and_adds_the_surface_delta(tmp_path: Path) -> None:
    usage = {"inputTokens": 8000, "outputTokens": 10, "cacheReadTokens": 500, "cacheWriteTokens": 0}
    host = await start_host([{"text": "fine", "usage": usage}])
    try:
        handle = await host.create(tmp_path)
        agent = handle.agent
        meter: TokenMeter = host.kernel.ctx.require(TOKEN_METER)
        empty = meter.measure(agent.session)
        assert (empty.baseline.kind, empty.total_tokens) == ("none", 0)
        await host.run(agent, "hello")
        m = meter.measure(agent.session)
        assert m.baseline.kind == "usage" and m.baseline.tokens == 8510
        assert m.surface_delta_tokens == 0
        assert m.total_tokens == 8510
        assert [n.seq for n in m.nodes] == agent.session.surface.nodes
        assert m.surface_tokens == sum(n.tokens for n in m.nodes)
        late = {
            "role": "user",
            "id": "late",
            "source": {"kind": "user"},
            "content": [{"type": "text", "text": "x" * 40}],
        }
        agent.session.append("user/message", late, surface_op="append")
        after = meter.measure(agent.session)
        assert after.surface_delta_tokens == 10 + 4 + 4
        assert after.total_tokens == 8510 + 18
        other = {"config": {"provider": "p", "model": "m"}, "tools": []}
        moved = meter.measure(agent.session, request_header=other)
        assert moved.baseline.kind == "estimated" and moved.surface_delta_tokens == 0
        assert moved.total_tokens == after.surface_tokens
        assert m.to_json()["baseline"]["kind"] == "usage"
    finally:
        await host.close()


async def test_measure_estimates_when_usage_undercounts(tmp_path: Path) -> None:
    host = await start_host([{"text": "fine", "usage": {"inputTokens": 1, "outputTokens": 1}}])
    try:
        agent = (await host.create(tmp_path)).agent
        await host.run(agent, "hello")
        m = host.kernel.ctx.require(TOKEN_METER).measure(agent.session)
        tools = tools_tokens(agent.session.request_header()["tools"])
        assert m.baseline.kind == "estimated"
        assert m.baseline.tokens == tools + m.surface_tokens
    finally:
        await host.close()


def test_malformed_event_raises_without_half_applying() -> None:
    meter_fold = _MeterFold()
    events = [user(0, "hi"), assistant(1, "no step", {"inputTokens": 1, "outputTokens": 1})]
    with pytest.raises(MeterError, match="assistant/message without a matching step/start"):
        meter_fold.sync(events)
    assert meter_fold.upto == 1 and meter_fold.nodes == [0] and meter_fold.anchor is None


async def test_meter_config_accepts_no_keys() -> None:
    patch = [{"id": "token-meter", "config": {"ratio": 1}}]
    host = await start_host([], patches=(patch,))
    try:
        failed = [f for f in host.kernel.loader.failures if f.row_id == "token-meter"]
        assert len(failed) == 1
        assert 'TokenMeterConfig: unknown key "ratio" (no settings are supported)' in str(failed[0].error)
    finally:
        await host.close()


# -- projection units (§2.5) ---------------------------------------------------------------------------


def test_token_usage_replaces_within_a_step_and_adds_after_a_retry() -> None:
    unit = TokenUsageUnit()
    first = {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 5}
    second = {"inputTokens": 20, "outputTokens": 3}
    events = [ev(0, "step/start", {}), assistant(1, "a", first), assistant(2, "b", second)]
    assert unit.view(fold(unit, events)) == {
        "uncachedInputTokens": 20,
        "outputTokens": 3,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
    }
    retried = [events[1], ev(2, "llm/retry-started", {"turn": 1, "step": 1, "retryId": "r", "retry": 1}), events[2]]
    assert unit.view(fold(unit, retried))["uncachedInputTokens"] == 30
    next_step = [events[1], assistant(2, "b", second, step=2)]
    assert unit.view(fold(unit, next_step))["outputTokens"] == 5
    state = fold(unit, events)
    assert unit.apply(state, ev(9, "turn/end", {})) is state


def test_context_pressure_follows_usage_surface_and_shadow_claims() -> None:
    unit = ContextPressureUnit()
    events = [
        ev(0, "request/context", {"provider": "p", "model": "m", "contextWindow": 8000}),
        user(1, "x" * 40),
        assistant(2, "ok", {"inputTokens": 100, "outputTokens": 5, "cacheReadTokens": 20}),
        user(3, "y" * 40),
    ]
    state = fold(unit, events)
    assert unit.view(state) == {"contextWindow": 8000, "pressureTokens": 120, "projectedTokens": 120 + 9 + 18}
    claim = ev(
        4,
        "compaction/summary",
        {"shadowedRange": {"start": 1, "end": 2}, "shadowedSeqs": [1, 2], "shadowedTokenCount": 23},
    )
    replaced = fold(unit, [*events, claim, user(5, "s", {"op": "replace", "startSeq": 1, "endSeq": 2})])
    assert unit.view(replaced)["projectedTokens"] == 120 + 9 + 18 - 23 + 9
    with pytest.raises(MeterError, match="does not match the armed shadow claim"):
        fold(unit, [*events, claim, user(5, "s", {"op": "replace", "startSeq": 3, "endSeq": 3})])
    expired = fold(
        unit, [*events, claim, ev(5, "turn/end", {}), user(6, "s", {"op": "replace", "startSeq": 1, "endSeq": 2})]
    )
    assert unit.view(expired)["projectedTokens"] == 120 + 9 + 18
    cleared = unit.apply(state, ev(9, "request/context", {"provider": "p", "model": "m"}))
    assert "contextWindow" not in unit.view(cleared)


def test_context_breakdown_shares_and_system_swap() -> None:
    unit = ContextBreakdownUnit()
    header = {"config": {"provider": "p", "model": "m"}, "tools": [{"name": "bash"}]}
    events = [system(0, "x" * 16), ev(1, "request/header", {"header": header}), user(2, "y" * 8)]
    state = fold(unit, events)
    assert unit.view(state) == {
        "systemTokens": 8,
        "toolsTokens": tools_tokens(header["tools"]),
        "messageTokens": 2 + 4 + 4,
    }
    swapped = unit.apply(state, system(3, "z" * 40, {"op": "replace", "startSeq": 0, "endSeq": 0}))
    assert unit.view(swapped)["systemTokens"] == 14
    assert unit.view(swapped)["messageTokens"] == 10


def test_every_shipped_profile_meters_on_the_host() -> None:
    from pydsh.kernel.compose import SHIPPED, walk
    from tests.agent.harness import compose

    templates = sorted((SHIPPED / "templates").glob("*.yml"))
    assert templates
    for template in templates:
        bundles = yaml.safe_load(template.read_text())["bundles"]
        rows = compose(bundles if "presets" in bundles else [*bundles, "presets"], []).rows
        top = [r for r in rows if r.name == "token-meter"]
        assert len(top) == 1, template.name
        nested = [r for _h, r in walk(rows) if r.name == "token-meter"]
        assert nested == top, template.name
        for row in rows:
            if row.name == "agent-preset":
                assert "token-meter" not in str(row.config["plugins"]), template.name


async def test_the_meter_refuses_to_load_inside_a_preset() -> None:
    preset = {
        "id": "preset-metered",
        "name": "agent-preset",
        "config": {"id": "metered", "plugins": [{"id": "meter-again", "name": "token-meter"}]},
    }
    host = await start_host([], bundles=("base", "presets"), patches=([{"insert": [preset]}],))
    try:
        broken = host.kernel.ctx.require(AGENT_PRESETS).resolve("metered")["broken"]
        assert 'row "meter-again" (token-meter)' in broken
        assert "token-meter belongs to the host composition" in broken
        assert host.kernel.ctx.require(AGENT_PRESETS).resolve("standard") == {"id": "standard"}
    finally:
        await host.close()


def test_a_failed_attempt_counts_its_last_usage_chunk() -> None:
    unit = TokenUsageUnit()
    stream = [
        {"type": "chunk", "time": 1, "chunk": {"type": "usage", "usage": {"inputTokens": 3, "outputTokens": 1}}},
        {"type": "chunk", "time": 2, "chunk": {"type": "usage", "usage": {"inputTokens": 7, "outputTokens": 2}}},
    ]
    attempt = ev(1, "assistant/attempt", {"turn": 1, "step": 1, "stream": stream})
    retry = ev(2, "llm/retry-started", {"turn": 1, "step": 1, "retryId": "r", "retry": 1})
    state = fold(unit, [attempt, retry, assistant(3, "ok", {"inputTokens": 10, "outputTokens": 4})])
    assert unit.view(state)["uncachedInputTokens"] == 17
    assert unit.view(state)["outputTokens"] == 6


@pytest.mark.parametrize("view", [{"total": "3"}, {"total": True}, {"total": 1.5}, {1: 2}, [("total", 1)]])
def test_a_meter_view_that_is_not_a_map_of_integers_is_refused(view: object) -> None:
    with pytest.raises(TypeError, match="maps names to integers"):
        int_map(view)


def test_a_meter_view_of_integers_passes_unchanged() -> None:
    view = {"total": 3, "cached": 0}
    assert int_map(view) is view


def test_sessions_measured_in_turn_price_their_tools_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many sessions stepping at once must not take turns evicting each other's tool price."""
    priced: list[Any] = []
    monkeypatch.setattr(meter_module, "tools_tokens", lambda tools: priced.append(tools) or len(tools) * 10)
    sessions = []
    for name in ("a", "b"):
        session = Session(make_header(name, 0))
        session.append("turn/start", {"turn": 1})
        header = {"config": {"provider": "p", "model": "m"}, "tools": [{"name": f"tool-{name}"}]}
        session.append("request/header", {"header": header, "reason": "initial"})
        sessions.append(session)
    meter = TokenMeter()
    totals = [meter.measure(s).total_tokens for _ in range(3) for s in sessions]
    assert totals == [10] * 6
    assert [t[0]["name"] for t in priced] == ["tool-a", "tool-b"]
