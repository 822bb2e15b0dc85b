"""Delegation records, names, limits and settlement (spec 07 §9 acceptance 1–13)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pydsh.agent.loop import LoopAgent
from pydsh.contract.tools import TOOLS, ToolDefinition
from pydsh.session.hooks import SESSION_CREATED
from pydsh.session.log import new_session_id
from pydsh.subagents.hooks import SUBAGENT_START
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.names import CATALOG, SEGMENT
from tests.agent.harness import Host, start_host
from tests.subagents.helpers import calls, deleg, of_type, quiesce, result_texts, results


async def boot(scripts: list[Any], tmp_path: Path, patches: tuple[Any, ...] = ()) -> tuple[Host, LoopAgent]:
    host = await start_host(scripts, patches=patches)
    handle = await host.create(tmp_path)
    return host, handle.agent


async def test_delegation_records_and_first_message(tmp_path: Path) -> None:
    host, root = await boot(
        [[calls(deleg("scan repo")), {"text": "ok"}, {"text": "noted"}], [{"text": "found it"}]], tmp_path
    )
    captured: dict[str, Any] = {}
    host.kernel.ctx.on(
        SESSION_CREATED, lambda s: captured.setdefault("child", s) if s.header.get("parentSession") else None
    )
    try:
        await host.run(root, "go")
        await quiesce(host)
        result = results(root.session)[0]
        assert result_texts(root.session)[0] == "started subagent agent-1"
        child_id = result["meta"]["subagentId"]
        assert result["meta"] == {"kind": "activation", "subagentId": child_id, "name": "agent-1"}
        assert len(child_id) == 36
        child = captured["child"]
        header = child.header
        assert (header["parentSession"], header["origin"], header["delegationDepth"]) == (root.id, "subagent", 1)
        kinds = [e["type"] for e in child.events]
        assert kinds.count("subagent/descriptor") == 1
        assert kinds.index("subagent/descriptor") < kinds.index("request/header")
        descriptor = of_type(child, "subagent/descriptor")[0]["data"]
        assert (descriptor["version"], descriptor["mode"], descriptor["label"]) == (3, "continuable", "scan repo")
        catalog = of_type(root.session, "subagent/catalog")
        assert len(catalog) == 1
        assert catalog[0]["data"] == {
            "childId": child_id,
            "childCreatedAt": header["createdAt"],
            "version": 3,
            "mode": "continuable",
            "label": "scan repo",
            "name": "agent-1",
        }
        first = next(e for e in child.events if e["type"] == "user/message")["data"]["content"]
        assert first[0] == {"type": "text", "text": "p"}
        assert first[1]["text"].startswith('Your parent agent is "lead". Before you finish, send your result')
        assert 'send_message({ agent: "lead", message: "<self-contained result>" })' in first[1]["text"]
        notice = [e for e in of_type(root.session, "user/message") if e["data"]["source"]["kind"] == "subagent-settled"]
        assert [b["text"] for b in notice[0]["data"]["content"]] == [
            "Background subagent agent-1 finished and will do no further work unless you send it more.",
            "Its closing message:",
            "found it",
        ]
        assert notice[0]["data"]["source"]["senderSessionId"] == child_id
        host.replay.assert_consumed()
    finally:
        await host.close()


async def test_sequential_delegations_get_agent_1_to_3(tmp_path: Path) -> None:
    root_script = [calls(deleg("a")), calls(deleg("b")), calls(deleg("c")), {"text": "done"}]
    root_script += [{"text": "ack"}] * 3
    host, root = await boot([root_script, [{"text": "1"}], [{"text": "2"}], [{"text": "3"}]], tmp_path)
    try:
        await host.run(root, "go")
        await quiesce(host)
        names = [r["meta"]["name"] for r in results(root.session)]
        assert names == ["agent-1", "agent-2", "agent-3"]
    finally:
        await host.close()


async def test_parallel_pair_gets_distinct_names_and_interleaves(tmp_path: Path) -> None:
    host, root = await boot(
        [
            [calls(deleg("a"), deleg("b")), {"text": "done"}, {"text": "ack"}, {"text": "ack"}],
            [{"text": "x"}],
            [{"text": "y"}],
        ],
        tmp_path,
    )
    try:
        await host.run(root, "go")
        await quiesce(host)
        kinds = [e["type"] for e in root.session.events if e["type"] in ("tool/call", "tool/result")]
        assert kinds[:4] == ["tool/call", "tool/call", "tool/result", "tool/result"]
        assert sorted(r["meta"]["name"] for r in results(root.session)[:2]) == ["agent-1", "agent-2"]
    finally:
        await host.close()


async def test_invalid_and_duplicate_names_fail_before_anything_starts(tmp_path: Path) -> None:
    bad = ["Reviewer", "1abc", "lead", "a" * 33, "", "a/b", "-x", "Lead"]
    script = [calls(*(deleg(name=n) for n in bad)), calls(deleg(name="reviewer")), calls(deleg(name="reviewer"))]
    script += [{"text": "done"}, {"text": "ack"}]
    host, root = await boot([script, [{"text": "r"}]], tmp_path)
    starts: list[Any] = []
    host.kernel.ctx.on(SUBAGENT_START, starts.append)
    try:
        await host.run(root, "go")
        await quiesce(host)
        texts = result_texts(root.session)
        for name, text in zip(bad, texts, strict=False):
            assert text == (
                f'Error: invalid agent name "{name}": use 1-32 lowercase letters, digits, or hyphens, '
                'starting with a letter, and not "lead"'
            )
        assert [r["error"]["code"] for r in results(root.session)[: len(bad)]] == ["INVALID_AGENT_NAME"] * len(bad)
        assert texts[len(bad)] == "started subagent reviewer"
        assert texts[len(bad) + 1] == (
            'Error: agent name "reviewer" is already taken among the subagents you started; '
            "choose another name or omit name"
        )
        assert len(of_type(root.session, "subagent/catalog")) == 1
        assert len(starts) == 1
    finally:
        await host.close()


async def test_automatic_names_skip_taken_and_reuse_free(tmp_path: Path) -> None:
    script = [calls(deleg(name="agent-1")), calls(deleg()), calls(deleg(name="agent-4")), {"text": "done"}]
    script += [{"text": "ack"}] * 3
    host, root = await boot([script, [{"text": "1"}], [{"text": "2"}], [{"text": "4"}]], tmp_path)
    try:
        await host.run(root, "go")
        await quiesce(host)
        assert [r["meta"]["name"] for r in results(root.session)] == ["agent-1", "agent-2", "agent-4"]
    finally:
        await host.close()


async def test_failed_start_releases_the_name(tmp_path: Path) -> None:
    script = [calls(deleg(name="x", cwd="missing-dir")), calls(deleg(name="x")), {"text": "done"}, {"text": "ack"}]
    host, root = await boot([script, [{"text": "x done"}]], tmp_path)
    try:
        await host.run(root, "go")
        await quiesce(host)
        texts = result_texts(root.session)
        assert texts[0] == f'Error: subagent cwd does not exist: "{tmp_path / "missing-dir"}"'
        assert texts[1] == "started subagent x"
        assert len(of_type(root.session, "subagent/catalog")) == 1
    finally:
        await host.close()


async def test_depth_limit_and_depth_context(tmp_path: Path) -> None:
    host, root = await boot(
        [[calls(deleg()), {"text": "waiting"}, {"text": "ack"}], [calls(deleg("deeper")), {"text": "child done"}]],
        tmp_path,
    )
    captured: list[Any] = []
    host.kernel.ctx.on(SESSION_CREATED, lambda s: captured.append(s) if s.header.get("parentSession") else None)
    try:
        await host.run(root, "go")
        await quiesce(host)
        child = captured[0]
        texts = result_texts(child)
        assert texts[0] == "Error: subagent depth 2 exceeds maxDepth 1"
        assert results(child)[0]["error"]["code"] == "DEPTH_EXCEEDED"
        snapshot = next(
            e for e in child.events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "runtime-context"
        )
        names = [s["name"] for s in snapshot["data"]["source"]["sections"]]
        assert (
            names.index("subagent:identity") < names.index("subagent:delegation") < names.index("tool:subagent:depth")
        )
        depth = next(s for s in snapshot["data"]["source"]["sections"] if s["name"] == "tool:subagent:depth")
        assert depth["text"].startswith("Delegation depth for `subagent`: current 1, maximum 1, remaining levels 0.")
    finally:
        await host.close()


async def test_active_limit(tmp_path: Path) -> None:
    hang = {"kind": "hang"}
    patch = [{"id": "subagent", "config": {"maxActiveSubagents": 2}}]
    host, root = await boot(
        [[calls(deleg("a"), deleg("b")), calls(deleg("c")), {"text": "done"}], [hang], [hang]], tmp_path, (patch,)
    )
    try:
        await host.run(root, "go")
        texts = result_texts(root.session)
        assert texts[2] == (
            "Error: subagent limit reached (active child limit: 2); wait for an existing child to finish "
            "or complete this work with the current agents"
        )
        assert results(root.session)[2]["error"]["code"] == "ACTIVATION_LIMIT_REACHED"
    finally:
        await host.close()


async def test_failed_child_and_empty_closing_message(tmp_path: Path) -> None:
    host, root = await boot(
        [
            [calls(deleg("a")), {"text": "wait"}, {"text": "ack"}],
            [{"throw": {"code": "AUTH", "message": "bad key", "status": 401}}],
        ],
        tmp_path,
    )
    try:
        await host.run(root, "go")
        await quiesce(host)
        notice = next(
            e for e in of_type(root.session, "user/message") if e["data"]["source"]["kind"] == "subagent-settled"
        )
        assert [b["text"] for b in notice["data"]["content"]] == [
            "Background subagent agent-1 failed before it finished.",
            "It left no closing message.",
        ]
    finally:
        await host.close()


async def test_foreground_one_shot_returns_the_answer(tmp_path: Path) -> None:
    host, root = await boot(
        [[calls(deleg("quick", run_in_background=False)), {"text": "done"}], [{"text": "the answer"}]], tmp_path
    )
    try:
        await host.run(root, "go")
        await quiesce(host)
        assert result_texts(root.session)[0] == "the answer"
        assert of_type(root.session, "subagent/catalog")[0]["data"]["mode"] == "one-shot"
        assert not [
            e for e in of_type(root.session, "user/message") if e["data"]["source"]["kind"] == "subagent-settled"
        ]
    finally:
        await host.close()


@given(st.integers(min_value=0, max_value=50))
def test_minted_ids_never_match_the_segment_grammar(_n: int) -> None:
    assert not SEGMENT.match(new_session_id())


async def test_fork_child_starts_with_the_completed_prefix(tmp_path: Path) -> None:
    """``subagent_fork`` is shipped in ``agent-tools`` (the sdk and headless planes), no patch needed."""
    fork = {"name": "subagent_fork", "arguments": {"description": "review", "prompt": "review it"}}
    host, root = await boot(
        [[{"text": "first answer"}, calls(fork), {"text": "wait"}, {"text": "ack"}], [{"text": "reviewed"}]], tmp_path
    )
    captured: list[Any] = []
    host.kernel.ctx.on(SESSION_CREATED, lambda s: captured.append(s) if s.header.get("parentSession") else None)
    try:
        await host.run(root, "one")
        await host.run(root, "two")
        await quiesce(host)
        child = captured[0]
        assert child.header["isSeeded"] is True
        marker = child.inherited_event_count
        assert child.events[marker]["data"] == {"inherited": True}
        first_turn_end = next(e["seq"] for e in root.session.events if e["type"] == "turn/end")
        assert marker == first_turn_end + 1
        assert [e["type"] for e in child.events[:marker]] == [e["type"] for e in root.session.events[:marker]]
        assert child.fold(CATALOG) == []
    finally:
        await host.close()


async def test_settlement_while_parent_busy_is_claimed_at_next_step(tmp_path: Path) -> None:
    release = asyncio.Event()
    host, root = await boot(
        [[calls(deleg("a")), calls({"name": "wait_tool", "arguments": {}}), {"text": "done"}], [{"text": "quick"}]],
        tmp_path,
    )

    async def wait_tool(args: Any, exec: Any) -> str:
        service = host.kernel.ctx.require(SUBAGENTS)
        for _ in range(300):
            if not service.activations:
                break
            await asyncio.sleep(0.01)
        release.set()
        return "waited"

    host.kernel.ctx.require(TOOLS).register(
        host.kernel.ctx, ToolDefinition("wait_tool", "waits", {"type": "object", "properties": {}}, wait_tool)
    )
    try:
        await host.run(root, "go")
        await quiesce(host)
        assert release.is_set()
        assert [e["data"]["turn"] for e in of_type(root.session, "turn/start")] == [1]
        notice = [e for e in of_type(root.session, "user/message") if e["data"]["source"]["kind"] == "subagent-settled"]
        assert len(notice) == 1
    finally:
        await host.close()
