"""Request records and runtime context (spec 03 §12.11–12.12): header reasons, defaults, tool changes, snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydsh.agent.runtime_context import NONE_TEXT, project_snapshot
from pydsh.contract.agent import user_message
from pydsh.contract.tools import TOOLS, ToolDefinition
from pydsh.session.events import make_header
from pydsh.session.log import Session
from tests.agent.harness import REPLAY_PROVIDERS, start_host


def of(events: list[dict[str, Any]], etype: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == etype]


async def test_tool_change_logs_change_header_and_developer_message(tmp_path: Path) -> None:
    host = await start_host([{"text": "a"}, {"text": "b"}])
    agent = (await host.create(tmp_path)).agent
    try:
        await host.run(agent, "one")

        async def body(args: Any, exec: Any) -> str:
            return "x"

        host.kernel.ctx.require(TOOLS).register(
            host.kernel.ctx, ToolDefinition("zz_new", "new tool", {"type": "object", "properties": {}}, body)
        )
        events = await host.run(agent, "two")
        header = of(events, "request/header")[0]
        assert header["data"]["reason"] == "change"
        developer = of(events, "developer/message")[0]["data"]
        assert developer["message"]["content"] == [{"type": "tool-addition", "toolName": "zz_new"}]
        assert developer["message"]["source"] == {"kind": "tool-registry"}
        assert developer["headerSeq"] == header["seq"]
    finally:
        await host.close()


async def test_adapter_defaults_are_flagged_and_rematerialised(tmp_path: Path) -> None:
    providers = [
        {
            **REPLAY_PROVIDERS[0],
            "models": [
                {
                    "id": "deepseek-v4-flash",
                    "contextWindow": 64000,
                    "defaultMaxTokens": 4096,
                    "reasoningEfforts": ["off", "high"],
                    "defaultReasoningEffort": "high",
                }
            ],
        }
    ]
    host = await start_host([{"text": "a"}, {"text": "b"}], providers=providers)
    agent = (await host.create(tmp_path)).agent
    try:
        first = await host.run(agent, "one")
        header = of(first, "request/header")[0]["data"]["header"]
        assert header["config"] == {
            "provider": "deepseek-official",
            "model": "deepseek-v4-flash",
            "maxTokens": 4096,
            "reasoningEffort": "high",
        }
        assert header["adapterDefaults"] == {"reasoningEffort": True, "maxTokens": True}
        assert of(first, "request/context")[0]["data"]["contextWindow"] == 64000
        second = await host.run(agent, "two")
        assert of(second, "request/header") == []
        assert of(second, "request/context") == []
    finally:
        await host.close()


async def test_snapshot_re_emitted_after_the_surface_shadows_it(tmp_path: Path) -> None:
    host = await start_host([{"text": "a"}, {"text": "b"}])
    agent = (await host.create(tmp_path)).agent
    try:
        await host.run(agent, "one")
        session = agent.session
        nodes = list(session.surface.nodes)
        start = nodes[1]
        summary = user_message("summary of earlier work", {"kind": "compact-checkpoint", "compactionId": "c1"})
        session.append("compaction/start", {"compactionId": "c1", "turn": None})
        session.append("compaction/summary", {"compactionId": "c1", "summary": summary["content"]})
        session.append(
            "user/message",
            summary,
            surface_op={"op": "replace", "startSeq": start, "endSeq": nodes[-1]},
            source_event_seqs=nodes[1:],
        )
        session.append("compaction/end", {"compactionId": "c1", "turn": None})
        events = await host.run(agent, "two")
        snapshots = [e for e in of(events, "user/message") if e["data"]["source"]["kind"] == "runtime-context"]
        assert len(snapshots) == 1
        header = of(events, "request/header")[0]["data"]
        assert header["reason"] == "series"
    finally:
        await host.close()


def test_cleared_marker_when_contexts_become_empty() -> None:
    session = Session(make_header("s", 1))
    session.append("turn/start", {"turn": 1})
    assert project_snapshot(session, []) is None
    first = project_snapshot(session, [{"name": "x", "text": "X is on."}])
    assert first is not None
    session.append("user/message", first, surface_op="append")
    assert project_snapshot(session, [{"name": "x", "text": "X is on."}]) is None
    cleared = project_snapshot(session, [])
    assert cleared is not None
    assert cleared["content"] == [{"type": "text", "text": NONE_TEXT}]
    assert cleared["source"] == {"kind": "runtime-context"}
    session.append("user/message", cleared, surface_op="append")
    assert project_snapshot(session, []) is None


async def test_suppression_keeps_required_contexts(tmp_path: Path) -> None:
    patch = [{"id": "system-prompt", "config": {"includeRuntimeContext": False}}]
    host = await start_host([{"text": "a"}], patches=(patch,))
    agent = (await host.create(tmp_path)).agent
    try:
        events = await host.run(agent, "one")
        snapshot = next(e for e in of(events, "user/message") if e["data"]["source"]["kind"] == "runtime-context")
        assert [s["name"] for s in snapshot["data"]["source"]["sections"]] == ["working-directory:current"]
    finally:
        await host.close()


async def test_working_directory_change_moves_the_snapshot(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    script = [{"tool_calls": [{"name": "working_directory", "arguments": {"cd": "sub"}}]}, {"text": "moved"}]
    host = await start_host(script)
    agent = (await host.create(tmp_path)).agent
    try:
        events = await host.run(agent, "cd")
        changes = of(events, "working-directory/change")
        assert changes[0]["data"] == {"cwd": str(tmp_path / "sub")}
        notes = [e["data"] for e in of(events, "user/message") if e["data"]["source"]["kind"] == "working-directory"]
        assert (
            notes[0]["content"][0]["text"]
            == f'The working directory changed from "{tmp_path}" to "{tmp_path / "sub"}".'
        )
        snapshots = [e for e in of(events, "user/message") if e["data"]["source"]["kind"] == "runtime-context"]
        assert len(snapshots) == 2
        assert f'Current working directory: "{tmp_path / "sub"}".' in snapshots[1]["data"]["content"][0]["text"]
    finally:
        await host.close()
