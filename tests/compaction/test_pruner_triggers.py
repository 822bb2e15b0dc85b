"""The tool-result pruner (§4.7) and the automatic triggers (§4.3, §4.4)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from pydsh.compaction.keys import TOKEN_METER, TOOL_RESULT_PRUNER
from pydsh.compaction.pruner import MARKER, Config, pruned_content
from tests.compaction.helpers import compaction_host, summary_text, write_lines

# -- pruner --------------------------------------------------------------------------------------


def test_pruner_config_must_fit_head_marker_and_tail() -> None:
    assert Config().thresholdChars == 8192
    with pytest.raises(ValueError, match=r"must not exceed thresholdChars \(100\)"):
        Config(thresholdChars=100, headChars=50, tailChars=20)
    with pytest.raises(ValueError):
        Config(thresholdChars=0)


def test_pruned_content_keeps_head_and_tail_code_points_once() -> None:
    config = Config(thresholdChars=100, headChars=30, tailChars=10)
    text = "é" * 40 + "m" * 50 + "t" * 40
    out = pruned_content([{"type": "text", "text": text}], config)
    assert out == [{"type": "text", "text": "é" * 30 + MARKER + "t" * 10}]
    assert pruned_content([{"type": "text", "text": "x" * 100}], config) is None
    blocks = [{"type": "text", "text": "a" * 60}, {"type": "image", "data": "d"}, {"type": "text", "text": "b" * 60}]
    out = pruned_content(blocks, config)
    assert out == [
        {"type": "text", "text": "a" * 30 + MARKER},
        {"type": "image", "data": "d"},
        {"type": "text", "text": "b" * 10},
    ]
    assert pruned_content(blocks, config) == out


async def test_prune_session_replaces_only_oversized_results(tmp_path: Path) -> None:
    write_lines(tmp_path / "big.txt", 300)
    (tmp_path / "small.txt").write_text("s\n")
    script = [
        {"tool_calls": [{"name": "read", "arguments": {"file_path": "big.txt"}}]},
        {"tool_calls": [{"name": "read", "arguments": {"file_path": "small.txt"}}]},
        {"text": "done"},
    ]
    host, _s = await compaction_host(script, window=128000)
    try:
        handle = await host.create(tmp_path)
        await host.run(handle.agent, "read both")
        session = handle.agent.session
        pruner = host.kernel.ctx.require(TOOL_RESULT_PRUNER)
        meter = host.kernel.ctx.require(TOKEN_METER)
        results = [s for s in session.surface.nodes if session.events[s]["type"] == "tool/result"]
        big = session.events[results[0]]
        session.append("turn/start", {"turn": 2})
        size = len(session.events)
        assert pruner.prune_session(session) == 1
        prune, replace = session.events[size:]
        seq = big["seq"]
        assert prune["type"] == "compaction/prune"
        assert prune["data"] == {
            "shadowedRange": {"start": seq, "end": seq},
            "shadowedSeqs": [seq],
            "shadowedTokenCount": meter.estimate_message(big["data"]["message"]),
        }
        assert replace["surfaceOp"] == {"op": "replace", "startSeq": seq, "endSeq": seq}
        assert replace["sourceEventSeqs"] == [seq]
        old, new = big["data"], replace["data"]
        assert {k: v for k, v in old.items() if k != "message"} == {k: v for k, v in new.items() if k != "message"}
        assert new["message"]["id"] == old["message"]["id"]
        text = new["message"]["content"][0]["text"]
        assert MARKER in text and len(text) == 4096 + len(MARKER) + 1024
        assert pruner.prune_session(session) == 0
        assert session.events[big["seq"]] == big
        await handle.dispose()
    finally:
        await host.close()


# -- step pressure (§4.3) ------------------------------------------------------------------------


def read(n: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read", "arguments": {"file_path": "f.txt", "offset": n, "limit": 12}}]}


async def test_pruning_alone_can_relieve_the_pressure(tmp_path: Path) -> None:
    write_lines(tmp_path / "big.txt", 300)
    script = [{"tool_calls": [{"name": "read", "arguments": {"file_path": "big.txt"}}]}, {"text": "done"}]
    host, summariser = await compaction_host(script)
    try:
        handle = await host.create(tmp_path)
        events = await host.run(handle.agent, "read big.txt")
        types = [e["type"] for e in events]
        assert "compaction/prune" in types and "compaction/start" not in types
        assert not summariser.calls
        assert events[-1]["data"]["reason"] == {"kind": "completed"}
        await handle.dispose()
    finally:
        await host.close()


async def test_a_failing_summary_leaves_the_history_and_the_turn_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_lines(tmp_path / "f.txt", 400)
    script = [read(i * 12 + 1) for i in range(22)] + [{"text": "done"}]
    host, summariser = await compaction_host(script, {"headroomTokens": 1000, "compactionRetries": 0})
    summariser.answers.append({"error": {"code": "OVERLOADED", "message": "summariser down", "status": 503}})
    try:
        handle = await host.create(tmp_path)
        with caplog.at_level(logging.WARNING, "pydsh.compaction"):
            events = await host.run(handle.agent, "read it all")
        ends = [e for e in events if e["type"] == "compaction/end"]
        assert "summariser down" in ends[0]["data"]["error"]
        failed_at = ends[0]["seq"]
        before = [e for e in events if e["seq"] < failed_at]
        assert not any(e.get("surfaceOp", "append") != "append" for e in before if e["type"] == "user/message")
        assert any("step compaction failed: summariser down" in r.getMessage() for r in caplog.records)
        assert events[-1]["data"]["reason"] == {"kind": "completed"}
        assert len(ends) >= 2 and "error" not in ends[-1]["data"]
        await handle.dispose()
    finally:
        await host.close()


async def test_still_above_threshold_after_the_attempts_is_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_lines(tmp_path / "f.txt", 400)
    script = [read(i * 12 + 1) for i in range(26)] + [{"text": "done"}]
    # retain nearly the whole budget: each attempt can only shadow a little, so the pressure stays high
    config = {"headroomTokens": 1000, "retainTokens": 5900, "compactionRetries": 0}
    host, summariser = await compaction_host(script, config)
    summariser.answers.extend({"text": summary_text()} for _ in range(40))
    try:
        handle = await host.create(tmp_path)
        with caplog.at_level(logging.WARNING, "pydsh.compaction"):
            events = await host.run(handle.agent, "read")
        messages = [r.getMessage() for r in caplog.records]
        assert any(
            m.startswith("step compaction failed: compaction still above threshold after 1 compaction attempts (")
            and "estimated tokens >= threshold 6000)" in m
            for m in messages
        ), messages
        assert events[-1]["data"]["reason"] == {"kind": "completed"}
        await handle.dispose()
    finally:
        await host.close()


async def test_a_held_lock_skips_automatic_compaction_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_lines(tmp_path / "f.txt", 400)
    script = [read(i * 12 + 1) for i in range(22)] + [{"text": "done"}]
    host, summariser = await compaction_host(script)
    try:
        handle = await host.create(tmp_path)
        handle.agent.session.append("compaction/start", {"compactionId": "held", "turn": None})
        with caplog.at_level(logging.WARNING, "pydsh.compaction"):
            events = await host.run(handle.agent, "read")
        assert not summariser.calls
        assert "compaction/summary" not in [e["type"] for e in events]
        assert any(
            "pressure: compaction already in progress; the session compaction lock is already active" in r.getMessage()
            for r in caplog.records
        )
        await handle.dispose()
    finally:
        await host.close()


async def test_auto_false_registers_no_trigger(tmp_path: Path) -> None:
    write_lines(tmp_path / "f.txt", 400)
    overflow = {"error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "context too long", "status": 400}}
    script = [read(i * 12 + 1) for i in range(22)] + [overflow]
    host, summariser = await compaction_host(script, {"auto": False, "headroomTokens": 1000})
    try:
        handle = await host.create(tmp_path)
        events = await host.run(handle.agent, "read")
        assert not summariser.calls
        assert events[-1]["data"]["reason"]["error"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
        await handle.dispose()
    finally:
        await host.close()
