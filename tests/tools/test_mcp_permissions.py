"""MCP tools under the permission modes: read-only asks before a tool that may write (issue 21, item 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydsh.policy.approval import ApprovalRequest
from pydsh.policy.keys import APPROVAL
from tests.tools.harness import POLICY, Harness, harness, text_of
from tests.tools.test_mcp import stdio

DENIED = 'Error: tool "mcp__t__write" is denied under read-only mode: its MCP server does not mark it read-only'


async def world(tmp_path: Path, mode: str) -> Harness:
    rows = [("tools", None), *POLICY[:2], ("permission", {"mode": mode}), ("mcp-client", stdio())]
    return await harness(tmp_path, rows, startup=True)


def write(path: Path) -> dict[str, Any]:
    return {"path": str(path), "text": "changed"}


async def test_read_only_mode_denies_a_tool_not_marked_read_only_and_asks_like_a_built_in(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("original")
    h = await world(tmp_path, "read-only")
    try:
        exec = h.exec("mcp__t__write", write(target))
        outcome = await h.run(exec)
        assert text_of(outcome) == f"{DENIED}, and no approval channel is available to allow it"
        assert outcome.error == {"name": "ToolError", "code": "MCP_SANDBOX_DENIED"}
        assert target.read_text() == "original"
        asked, decided = h.events("approval/asked", "approval/decided")
        assert asked["data"] == {
            "id": asked["data"]["id"],
            "toolName": "mcp__t__write",
            "callId": exec.call_id,
            "reason": "run mcp__t__write under read-only mode: its MCP server does not mark it read-only",
        }
        assert decided["data"]["outcome"] == "unavailable"
        assert text_of(await h.call("mcp__t__peek", {"path": str(target)})) == "original"
        assert len(h.events("approval/asked")) == 1, "a tool marked readOnlyHint runs without asking"
    finally:
        await h.close()


async def test_an_approved_call_runs_once_and_a_rejected_one_stays_denied(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    answers = ["allowed-once", "rejected"]
    seen: list[ApprovalRequest] = []

    def answer(request: ApprovalRequest) -> str:
        seen.append(request)
        return answers.pop(0)

    h = await world(tmp_path, "read-only")
    try:
        h.kernel.ctx.require(APPROVAL).add_answerer(h.kernel.ctx, answer)
        assert text_of(await h.call("mcp__t__write", write(target))) == "written"
        assert target.read_text() == "changed"
        target.write_text("original")
        rejected = await h.call("mcp__t__write", write(target))
        assert text_of(rejected) == (
            'Error: the user rejected running tool "mcp__t__write" under read-only mode; it stays denied, '
            "so stop and explain instead of working around it"
        )
        assert target.read_text() == "original"
        assert [r.tool_name for r in seen] == ["mcp__t__write", "mcp__t__write"]
    finally:
        await h.close()


async def test_approval_policy_never_denies_without_asking_anyone(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    h = await world(tmp_path, "read-only")
    try:
        h.session.append("approval/policy", {"policy": "never"})
        outcome = await h.call("mcp__t__write", write(target))
        assert text_of(outcome) == f"{DENIED}, and approval prompts are disabled in this session"
        assert not target.exists()
    finally:
        await h.close()


async def test_workspace_write_runs_mcp_tools_without_asking(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    h = await world(tmp_path, "workspace-write")
    try:
        assert text_of(await h.call("mcp__t__write", write(target))) == "written"
        assert target.read_text() == "changed"
        assert h.events("approval/asked") == []
    finally:
        await h.close()
