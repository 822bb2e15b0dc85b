"""compaction-basic: config, budgets, range selection, the transaction, the summariser, manual compaction (§4)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from pydsh.compaction.basic import BasicCompaction, Config, select_range
from pydsh.compaction.engine import (
    ManualCompactionError,
    TargetPressureConfigError,
    compact_checkpoint_source,
    open_compaction,
    tool_pairing_balanced_after,
    tool_pairing_balanced_before,
)
from pydsh.compaction.hooks import SUMMARY_ERROR
from pydsh.compaction.keys import COMPACTION, TOKEN_METER, TOOL_RESULT_PRUNER
from pydsh.compaction.summary import INSTRUCTION, PREAMBLE, SECTIONS
from pydsh.contract.agent import user_message
from pydsh.host import HostError
from pydsh.kernel import Kernel
from pydsh.kernel.compose import resolve_rows
from pydsh.testing import scripted_host
from tests.agent.harness import compose, scripted_patch
from tests.compaction.helpers import canon, compaction_host, providers, summary_text, write_lines


def read(n: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read", "arguments": {"file_path": "f.txt", "offset": n, "limit": 10}}]}


async def session_with_history(tmp_path: Path, steps: int = 4, **kw: Any) -> Any:
    """A host whose agent ran one turn of ``steps`` reads and an answer (no automatic compaction)."""
    write_lines(tmp_path / "f.txt", 200)
    script = [read(i * 10 + 1) for i in range(steps)] + [{"text": "done"}]
    host, summariser = await compaction_host(script, kw.pop("compaction", None), window=kw.pop("window", 128000), **kw)
    handle = await host.create(tmp_path)
    await host.run(handle.agent, "read f.txt")
    return host, summariser, handle


def engine_of(host: Any) -> BasicCompaction:
    return host.kernel.ctx.require(COMPACTION)  # type: ignore[no-any-return]


# -- configuration (§4.2) ---------------------------------------------------------------------


def test_defaults() -> None:
    config = Config()
    assert (config.auto, config.thresholdRatio, config.headroomTokens) == (True, 0.8, 65536)
    assert config.retain_ratio == 0.16 and config.summary_max_tokens == 65536
    assert (config.compactionRetries, config.maxOverflowRetries, config.modelPolicies) == (1, 1, [])


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"colour": 1}, 'BasicCompactionConfig: unknown key "colour"'),
        ({"thresholdRatio": 0}, "greater than 0"),
        ({"thresholdRatio": 1.5}, "less than or equal to 1"),
        ({"headroomTokens": -1}, "greater than or equal to 0"),
        ({"retainRatio": 0.1, "retainTokens": 10}, "mutually exclusive"),
        ({"retainRatio": 0.9}, "must be below thresholdRatio"),
        ({"summarizationProvider": "p"}, "together"),
        ({"maxTokens": 0}, "greater than 0"),
        ({"compactionRetries": -1}, "greater than or equal to 0"),
        ({"modelPolicies": [{"provider": "p", "model": "m"}, {"provider": "p", "model": "m"}]}, "duplicate"),
        ({"modelPolicies": [{"provider": "p", "model": "m", "bogus": 1}]}, 'unknown key "bogus"'),
        ({"modelPolicies": [{"provider": "p", "model": "m", "retainRatio": 0.95}]}, "must be below"),
    ],
)
def test_bad_config_is_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Config.model_validate(raw)


def test_model_policy_overrides_one_target() -> None:
    config = Config.model_validate(
        {"retainRatio": 0.2, "modelPolicies": [{"provider": "p", "model": "m", "retainTokens": 500, "maxTokens": 9}]}
    )
    assert config.settings_for("p", "m").retainTokens == 500
    assert config.settings_for("p", "m").retain_ratio is None
    assert config.settings_for("p", "m").summary_max_tokens == 9
    assert config.settings_for("p", "other").retain_ratio == 0.2


async def load(patch: list[dict[str, Any]], bundles: tuple[str, ...] = ("base",)) -> Kernel:
    comp = compose(list(bundles), [scripted_patch([], providers()), patch])
    kernel = Kernel()
    await kernel.load(resolve_rows(comp.rows))
    return kernel


async def test_broken_config_fails_start_up_with_one_message(tmp_path: Path) -> None:
    patch = [{"id": "compaction-basic", "config": {"retainRatio": 0.1, "retainTokens": 3}}]
    with pytest.raises(HostError) as info:
        async with scripted_host([], patches=[patch], cwd=tmp_path):
            pass
    message = str(info.value)
    assert "compaction-basic" in message and "retainRatio and retainTokens are mutually exclusive" in message
    assert "\n" not in message


async def test_a_profile_without_the_meter_fails_start_up(tmp_path: Path) -> None:
    patch = [{"id": "token-meter", "disabled": True}]
    with pytest.raises(HostError) as info:
        async with scripted_host([], patches=[patch], cwd=tmp_path):
            pass
    message = str(info.value)
    assert "compaction-basic needs the token_meter service" in message
    assert "\n" not in message


async def test_shipped_profiles_mount_the_engine() -> None:
    kernel = await load([], ("base", "agent-tools"))
    try:
        assert kernel.ctx.get(COMPACTION) is not None and kernel.ctx.get(TOOL_RESULT_PRUNER) is not None
    finally:
        await kernel.dispose()


# -- budgets (§4.2) ----------------------------------------------------------------------------


async def test_budgets_follow_the_window_reserve_and_headroom(tmp_path: Path) -> None:
    host, _s, handle = await session_with_history(tmp_path, 1, compaction={"headroomTokens": 1000}, window=8000)
    try:
        budgets = await engine_of(host).budgets(handle.agent.session, "deepseek-official", "deepseek-v4-flash")
        # reserved = defaultMaxTokens 1000: messageBudget 7000, pressure budget 6000, retain floor(7000 * 0.16)
        assert (budgets.context_window, budgets.threshold, budgets.retain) == (8000, 6000, 1120)
        with pytest.raises(TargetPressureConfigError, match="leaves no pressure budget"):
            engine_of(host).config = Config.model_validate({"headroomTokens": 7000})
            await engine_of(host).budgets(handle.agent.session, "deepseek-official", "deepseek-v4-flash")
        engine_of(host).config = Config.model_validate({"headroomTokens": 0, "retainTokens": 7000})
        with pytest.raises(TargetPressureConfigError, match="is not below the threshold"):
            await engine_of(host).budgets(handle.agent.session, "deepseek-official", "deepseek-v4-flash")
        await handle.dispose()
    finally:
        await host.close()


async def test_a_target_without_a_window_warns_once_and_the_turn_continues(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_lines(tmp_path / "f.txt", 50)
    script = [read(1), read(11), {"text": "done"}]
    host, summariser = await compaction_host(script, window=None)
    try:
        handle = await host.create(tmp_path)
        with caplog.at_level(logging.WARNING, "pydsh.compaction"):
            events = await host.run(handle.agent, "go")
        assert events[-1]["data"]["reason"] == {"kind": "completed"}
        warnings = [r.getMessage() for r in caplog.records if "step compaction failed" in r.getMessage()]
        assert len(warnings) == 1 and "has no contextWindow" in warnings[0]
        assert warnings[0].endswith("; continuing the turn")
        assert not summariser.calls
        await handle.dispose()
    finally:
        await host.close()


# -- range selection and balance (§4.1, §4.5) -------------------------------------------------


async def test_range_skips_the_system_head_and_keeps_a_balanced_tail(tmp_path: Path) -> None:
    host, _s, handle = await session_with_history(tmp_path, 4)
    try:
        session = handle.agent.session
        meter = host.kernel.ctx.require(TOKEN_METER)
        nodes = session.surface.nodes
        assert session.events[nodes[0]]["type"] == "system/message"
        m = meter.measure(session)
        start, end = select_range(session, m, 0) or (0, 0)
        assert (start, end) == (nodes[1], nodes[-1])
        tail = m.nodes[-1].tokens + m.nodes[-2].tokens
        start, end = select_range(session, m, tail) or (0, 0)
        kept = nodes[nodes.index(end) + 1 :]
        assert start == nodes[1] and kept
        assert tool_pairing_balanced_before(session, kept[0])
        assert tool_pairing_balanced_after(session, end)
        assert select_range(session, m, 10**9) is None
        calls = [s for s in nodes if session.events[s]["type"] == "assistant/message"]
        assert not tool_pairing_balanced_after(session, calls[0])
        assert not tool_pairing_balanced_before(session, calls[0] + 2)
        await handle.dispose()
    finally:
        await host.close()


def test_checkpoint_source() -> None:
    assert compact_checkpoint_source("c1") == {"kind": "compact-checkpoint", "compactionId": "c1"}
    assert compact_checkpoint_source("c1", "k")["sourceCommandId"] == "k"


# -- the transaction (§4.6) and the summariser (§4.9) -----------------------------------------


async def test_manual_compaction_writes_four_events_and_keeps_the_log(tmp_path: Path) -> None:
    host, summariser, handle = await session_with_history(tmp_path, 4)
    try:
        agent = handle.agent
        session = agent.session
        before = [dict(e) for e in session.events]
        old_view = session.derive_messages()
        nodes = list(session.surface.nodes)
        result = await engine_of(host).compact_now(agent, None, "cmd-1")
        new = session.events[len(before) :]
        assert [e["type"] for e in new] == [
            "compaction/start",
            "compaction/summary",
            "user/message",
            "compaction/end",
        ]
        start, summary, checkpoint, end = new
        assert canon(session.events[: len(before)]) == canon(before)
        ids = {"compactionId": start["data"]["compactionId"], "sourceCommandId": "cmd-1"}
        assert start["data"] == {**ids, "turn": None}
        assert end["data"] == {**ids, "turn": None}
        shadowed = nodes[1:]
        assert summary["data"]["shadowedRange"] == {"start": shadowed[0], "end": shadowed[-1]}
        assert summary["data"]["shadowedSeqs"] == shadowed
        meter = host.kernel.ctx.require(TOKEN_METER)
        assert (
            summary["data"]["shadowedTokenCount"] == sum(meter.estimate_message(m) for m in old_view[1:])
            or summary["data"]["shadowedTokenCount"] > 0
        )
        assert summary["data"]["llmStreamCall"] is True
        assert summary["data"]["summary"] == [{"type": "text", "text": summary_text("call 1")}]
        assert checkpoint["surfaceOp"] == {"op": "replace", "startSeq": shadowed[0], "endSeq": shadowed[-1]}
        assert checkpoint["sourceEventSeqs"] == [start["seq"], summary["seq"], *shadowed]
        message = checkpoint["data"]
        assert message["source"] == {"kind": "compact-checkpoint", **ids}
        assert message["content"][0] == {"type": "text", "text": PREAMBLE + "\n\n<compacted-summary>"}
        assert message["content"][-1] == {"type": "text", "text": "</compacted-summary>"}
        view = session.derive_messages()
        assert len(view) == 2 and view[0] == old_view[0] and view[1]["content"] == message["content"]
        assert result.checkpoint_seq == checkpoint["seq"]
        call = summariser.calls[0]
        assert call["purpose"] == "compaction" and call["sessionId"] == session.id
        assert call["messages"][:-1] == old_view
        assert call["messages"][-1]["content"] == [{"type": "text", "text": INSTRUCTION}]
        assert call["tools"] == session.request_header()["tools"]
        assert open_compaction(session) is None
        await handle.dispose()
    finally:
        await host.close()


def test_instruction_has_the_exact_sections_in_order() -> None:
    headings = [line[3:] for line in INSTRUCTION.split("\n") if line.startswith("## ")]
    assert headings == list(SECTIONS)
    assert INSTRUCTION.startswith("You are now acting as a compaction engine for this AI coding assistant.")
    assert INSTRUCTION.endswith("merge newer information into a single consolidated summary under the same structure.")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"error": {"code": "RATE_LIMIT", "message": "slow down", "status": 429}}, "slow down"),
        ({"text": "partial", "stop": "max-tokens"}, "summarization truncated at the token cap"),
        ({"reasoning": "thinking", "text": "  "}, "summarization produced no text summary content"),
        ({"text": "x" * 40000}, "summary is not smaller than the shadowed content"),
    ],
)
async def test_a_failed_summary_leaves_the_history_untouched(tmp_path: Path, answer: Any, message: str) -> None:
    host, summariser, handle = await session_with_history(tmp_path, 2)
    try:
        session = handle.agent.session
        view = canon(session.derive_messages())
        size = len(session.events)
        summariser.answers.append(answer)
        with pytest.raises(ManualCompactionError, match=message) as info:
            await engine_of(host).compact_now(handle.agent, None)
        assert info.value.code == "summary"
        new = session.events[size:]
        assert [e["type"] for e in new] == ["compaction/start", "compaction/end"]
        assert message in new[1]["data"]["error"]
        assert canon(session.derive_messages()) == view
        assert open_compaction(session) is None
        await handle.dispose()
    finally:
        await host.close()


async def test_reasoning_and_tool_calls_are_dropped_from_the_summary(tmp_path: Path) -> None:
    host, summariser, handle = await session_with_history(tmp_path, 2)
    try:
        summariser.answers.append(
            {"reasoning": "hmm", "text": summary_text("kept"), "tool_calls": [{"name": "read", "arguments": {}}]}
        )
        await engine_of(host).compact_now(handle.agent, None)
        summary = next(e for e in handle.agent.session.events if e["type"] == "compaction/summary")
        assert summary["data"]["summary"] == [{"type": "text", "text": summary_text("kept")}]
        assert [b["type"] for b in summary["data"]["rawOutput"]] == ["reasoning", "text", "tool-call"]
        await handle.dispose()
    finally:
        await host.close()


async def test_summary_error_listener_may_repair_and_retry(tmp_path: Path) -> None:
    host, summariser, handle = await session_with_history(tmp_path, 2)
    seen: list[dict[str, Any]] = []

    async def repair(payload: dict[str, Any], nxt: Any) -> Any:
        seen.append(payload)
        session = payload["session"]
        prompt = payload["sourceEventSeqs"][0]
        replace = {"op": "replace", "startSeq": prompt, "endSeq": prompt}
        session.append("user/message", user_message("repaired prompt"), surface_op=replace, source_event_seqs=[prompt])
        return True

    host.kernel.ctx.on(SUMMARY_ERROR, repair)
    try:
        summariser.answers.append({"text": " "})
        await engine_of(host).compact_now(handle.agent, None)
        assert len(seen) == 1 and len(summariser.calls) == 2
        assert "no text summary content" in str(seen[0]["error"])
        texts = [m["content"][0].get("text") for m in summariser.calls[1]["messages"] if m["role"] == "user"]
        assert "repaired prompt" in texts
        session = handle.agent.session
        repaired = next(e for e in session.events if e["type"] == "user/message" and e.get("sourceEventSeqs"))
        summary = next(e for e in session.events if e["type"] == "compaction/summary")
        assert summary["data"]["shadowedSeqs"][0] == repaired["seq"]
        await handle.dispose()
    finally:
        await host.close()


async def test_the_lock_refuses_a_second_compaction_until_a_new_lifecycle(tmp_path: Path) -> None:
    host, _s, handle = await session_with_history(tmp_path, 2)
    try:
        session = handle.agent.session
        session.append("compaction/start", {"compactionId": "dead", "turn": None})
        with pytest.raises(ManualCompactionError, match="compaction already in progress") as info:
            await engine_of(host).compact_now(handle.agent, None)
        assert info.value.code == "busy"
        session.append("session/end-seed", {})
        assert open_compaction(session) is None
        await engine_of(host).compact_now(handle.agent, None)
        await handle.dispose()
    finally:
        await host.close()


async def test_manual_compaction_needs_an_idle_agent(tmp_path: Path) -> None:
    write_lines(tmp_path / "f.txt", 20)
    host, _s = await compaction_host([{"hang": True}], window=128000)
    try:
        handle = await host.create(tmp_path)
        agent = handle.agent
        agent.followup(user_message("go"))
        for _ in range(50):
            if agent.status == "running":
                break
            await asyncio.sleep(0.01)
        with pytest.raises(ManualCompactionError, match="requires an idle agent") as info:
            await engine_of(host).compact_now(agent, None)
        assert info.value.code == "busy"
        agent.cancel({"kind": "user"})
        await agent.when_idle()
        await handle.dispose()
    finally:
        await host.close()


async def test_surface_change_during_summarisation_commits_nothing(tmp_path: Path) -> None:
    host, _summariser, handle = await session_with_history(tmp_path, 2)
    try:
        session = handle.agent.session
        engine = engine_of(host)
        real = engine._summarise

        async def racing(agent: Any, shadowed: list[int], signal: Any) -> Any:
            summary = await real(agent, shadowed, signal)
            session.append("user/message", user_message("late"), surface_op="append")
            return summary

        engine._summarise = racing  # type: ignore[method-assign]
        session.append("turn/start", {"turn": 2})
        span = select_range(session, host.kernel.ctx.require(TOKEN_METER).measure(session), 0)
        assert span is not None
        size = len(session.events)
        with pytest.raises(Exception, match="session surface changed during summarization"):
            await engine.compact_region(span[0], span[1], handle.agent)
        types = [e["type"] for e in session.events[size:]]
        assert types == ["compaction/start", "user/message", "compaction/end"]
        assert "error" in session.events[-1]["data"]
        await handle.dispose()
    finally:
        await host.close()


async def test_compact_region_refuses_unbalanced_cuts_and_closed_turns(tmp_path: Path) -> None:
    host, _s, handle = await session_with_history(tmp_path, 2)
    try:
        session = handle.agent.session
        engine = engine_of(host)
        with pytest.raises(Exception, match="automatic compaction needs an open turn"):
            await engine.compact_region(session.surface.nodes[1], session.surface.nodes[-1], handle.agent)
        session.append("turn/start", {"turn": 2})
        nodes = session.surface.nodes
        result = next(s for s in nodes if session.events[s]["type"] == "tool/result")
        with pytest.raises(Exception, match=f"start seq {result} is not a balanced boundary"):
            await engine.compact_region(result, nodes[-1], handle.agent)
        call = nodes[nodes.index(result) - 1]
        with pytest.raises(Exception, match=f"end seq {call} is not a balanced boundary"):
            await engine.compact_region(nodes[1], call, handle.agent)
        assert "compaction/start" not in [e["type"] for e in session.events]
        await handle.dispose()
    finally:
        await host.close()


async def test_cancelling_a_manual_compaction(tmp_path: Path) -> None:
    host, summariser, handle = await session_with_history(tmp_path, 2)
    try:
        agent = handle.agent
        view = canon(agent.session.derive_messages())
        summariser.answers.append({"hang": True})
        task = asyncio.ensure_future(engine_of(host).compact_now(agent, None))
        while not summariser.calls:
            await asyncio.sleep(0.01)
        agent.cancel({"kind": "user"})
        with pytest.raises(ManualCompactionError, match="manual compaction was cancelled") as info:
            await task
        assert info.value.code == "cancelled"
        assert canon(agent.session.derive_messages()) == view
        assert agent.session.events[-1]["type"] == "compaction/end"
        await handle.dispose()
    finally:
        await host.close()


async def test_the_configured_summarisation_pair_and_cap_are_used(tmp_path: Path) -> None:
    config = {"summarizationProvider": "deepseek-official", "summarizationModel": "summary-model", "maxTokens": 777}
    host, summariser, handle = await session_with_history(tmp_path, 1, compaction=config)
    try:
        await engine_of(host).compact_now(handle.agent, None)
        call = summariser.calls[0]
        assert (call["provider"], call["model"], call["maxTokens"]) == ("deepseek-official", "summary-model", 777)
        summary = next(e for e in handle.agent.session.events if e["type"] == "compaction/summary")
        assert (summary["data"]["provider"], summary["data"]["model"]) == ("deepseek-official", "summary-model")
        assert summary["data"]["maxTokens"] == 777
        await handle.dispose()
    finally:
        await host.close()
