"""End to end on an 8,000-token window: automatic compaction, overflow recovery, cold resume (spec 10 §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydsh.compaction.keys import TOKEN_METER
from pydsh.compaction.meter import TokenMeter
from tests.compaction.helpers import THRESHOLD, canon, compaction_host, write_lines


def read_step(n: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read", "arguments": {"file_path": "big.txt", "offset": n, "limit": 12}}]}


async def test_sixty_step_session_compacts_and_resumes_cold(tmp_path: Path) -> None:
    write_lines(tmp_path / "big.txt", 800)
    script = [read_step(i * 12 + 1) for i in range(60)] + [{"text": "all read"}]
    host, summariser = await compaction_host(script)
    meter: TokenMeter = host.kernel.ctx.require(TOKEN_METER)
    pressures: list[int] = []
    try:
        handle = await host.create(tmp_path)
        agent = handle.agent
        summariser.on_request = lambda options: pressures.append(meter.measure(agent.session).total_tokens)
        events = await host.run(agent, "read big.txt twelve lines at a time")
        assert events[-1]["data"]["reason"] == {"kind": "completed"}
        starts = [e for e in events if e["type"] == "compaction/start"]
        assert len(starts) >= 2
        assert all(e["data"]["turn"] == 1 for e in starts)
        assert len(pressures) == 61
        assert max(pressures) < THRESHOLD
        for start in starts:
            later = [e for e in events if e["seq"] > start["seq"]]
            header = next(e for e in later if e["type"] == "request/header")
            assert header["data"].get("startsSeries") or header["data"]["reason"] == "series"
            resent = next(e for e in later if e["type"] in ("user/message", "assistant/message") and "surfaceOp" in e)
            assert resent["type"] == "user/message" and resent["surfaceOp"] != "append"
            snapshot = next(e for e in later if e["type"] in ("user/message", "assistant/message") and e is not resent)
            assert snapshot["data"]["source"]["kind"] == "runtime-context"
        view = canon(agent.session.derive_messages())
        assert len(summariser.calls) == len(starts)
        session_id = agent.session.id
        total = len(agent.session.events)
        await handle.dispose()
        host.replay.assert_consumed()
    finally:
        await host.close()
    cold, _ = await compaction_host([])
    try:
        resumed = await cold.agents.resume(session_id)
        session = resumed.agent.session
        assert len(session.events) == total + 1
        assert canon(session.derive_messages()) == view
        await resumed.dispose()
    finally:
        await cold.close()


async def test_context_overflow_compacts_once_and_the_turn_succeeds(tmp_path: Path) -> None:
    write_lines(tmp_path / "big.txt", 40)
    overflow = {"error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "context too long", "status": 400}}
    script = [read_step(1), read_step(13), overflow, {"text": "done"}]
    host, summariser = await compaction_host(script, window=128000)
    try:
        handle = await host.create(tmp_path)
        events = await host.run(handle.agent, "read it")
        types = [e["type"] for e in events]
        assert types.count("compaction/start") == 1
        assert types.count("compaction/end") == 1
        assert "error" not in next(e for e in events if e["type"] == "compaction/end")["data"]
        assert events[-1]["data"]["reason"] == {"kind": "completed"}
        assert len(summariser.calls) == 1
        host.replay.assert_consumed()
        await handle.dispose()
    finally:
        await host.close()


async def test_second_overflow_in_the_same_step_stands(tmp_path: Path) -> None:
    write_lines(tmp_path / "big.txt", 40)
    overflow = {"error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "context too long", "status": 400}}
    script = [read_step(1), read_step(13), overflow, overflow]
    host, _summariser = await compaction_host(script, window=128000)
    try:
        handle = await host.create(tmp_path)
        events = await host.run(handle.agent, "read it")
        assert [e["type"] for e in events].count("compaction/start") == 1
        reason = events[-1]["data"]["reason"]
        assert reason["kind"] == "error" and reason["error"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
        host.replay.assert_consumed()
        await handle.dispose()
    finally:
        await host.close()


async def test_an_overflow_whose_summary_fails_leaves_the_error_standing(tmp_path: Path) -> None:
    write_lines(tmp_path / "big.txt", 40)
    overflow = {"error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "context too long", "status": 400}}
    host, summariser = await compaction_host([read_step(1), overflow], window=128000)
    summariser.answers.append({"error": {"code": "OVERLOADED", "message": "summariser down", "status": 503}})
    try:
        handle = await host.create(tmp_path)
        session = handle.agent.session
        events = await host.run(handle.agent, "read it")
        end = next(e for e in events if e["type"] == "compaction/end")
        assert "summariser down" in end["data"]["error"]
        assert session.surface.replace_generation == 0
        assert events[-1]["data"]["reason"]["error"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
        host.replay.assert_consumed()
        await handle.dispose()
    finally:
        await host.close()


async def test_the_overflow_allowance_renews_after_an_assistant_message(tmp_path: Path) -> None:
    write_lines(tmp_path / "big.txt", 40)
    overflow = {"error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "context too long", "status": 400}}
    script = [read_step(1), overflow, read_step(13), overflow, {"text": "done"}]
    host, summariser = await compaction_host(script, window=128000)
    try:
        handle = await host.create(tmp_path)
        events = await host.run(handle.agent, "read it")
        assert [e["type"] for e in events].count("compaction/summary") == 2
        assert events[-1]["data"]["reason"] == {"kind": "completed"}
        assert len(summariser.calls) == 2
        host.replay.assert_consumed()
        await handle.dispose()
    finally:
        await host.close()
