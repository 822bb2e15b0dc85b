"""sandbox_permissions escalation of write/edit: validation, approval asks and one-shot grants (spec 05 §5.6)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydsh.policy.approval import ApprovalRequest
from pydsh.policy.keys import APPROVAL
from tests.tools.harness import FS, POLICY, Harness, harness, text_of

DENIED = (
    "Error: [sandbox: file access denied under workspace-write mode]\n"
    "[sandbox: escalation available — retry this exact operation once with sandbox_permissions "
    "(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
)


@pytest.fixture
def outside() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pydsh-esc-", dir=Path.home()))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    world = await harness(tmp_path, FS + POLICY, startup=True)
    yield world
    await world.close()


def escalated(path: Path, justification: str = "test") -> dict[str, Any]:
    return {
        "file_path": str(path),
        "content": "x",
        "sandbox_permissions": "danger-full-access",
        "justification": justification,
    }


async def test_no_answerer_fails_closed_and_logs_the_ask(h: Harness, outside: Path) -> None:
    exec = h.exec("write", escalated(outside / "f.txt"))
    outcome = await h.run(exec)
    assert text_of(outcome) == (
        'Error: sandbox escalation to "danger-full-access" requires approval, but no approval channel is available'
    )
    asked, decided = h.events("approval/asked", "approval/decided")
    assert asked["data"] == {
        "id": asked["data"]["id"],
        "toolName": "write",
        "callId": exec.call_id,
        "reason": "escalate sandbox to danger-full-access: test",
    }
    assert decided["data"] == {"id": asked["data"]["id"], "outcome": "unavailable"}
    assert not (outside / "f.txt").exists()


async def test_allowed_once_covers_exactly_one_call(h: Harness, outside: Path) -> None:
    seen: list[ApprovalRequest] = []

    def allow(request: ApprovalRequest) -> str:
        seen.append(request)
        return "allowed-once"

    h.kernel.ctx.require(APPROVAL).add_answerer(h.agent.ctx, allow)
    target = outside / "f.txt"
    assert not (await h.call("write", escalated(target))).is_error
    assert target.read_text() == "x"
    assert seen[0].display_reason == {"en": "Allow this operation with danger-full-access permissions: test"}
    await h.call("read", {"file_path": str(target)})
    again = await h.call("write", {"file_path": str(target), "content": "y"})
    assert text_of(again) == DENIED
    assert target.read_text() == "x"
    assert [e["data"]["outcome"] for e in h.events("approval/decided")] == ["allowed-once"]


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        (
            "rejected",
            'the user rejected escalating this operation to "danger-full-access"; it stays denied, '
            "so stop and explain instead of working around it",
        ),
        ("cancelled", 'approval for escalating to "danger-full-access" was cancelled'),
        ("maybe", 'sandbox escalation to "danger-full-access" requires approval, but no approval channel is available'),
    ],
)
async def test_answer_outcomes(h: Harness, outside: Path, outcome: str, message: str) -> None:
    h.kernel.ctx.require(APPROVAL).add_answerer(h.agent.ctx, lambda request: outcome)
    result = await h.call("write", escalated(outside / "f.txt"))
    assert text_of(result) == f"Error: {message}"
    assert not (outside / "f.txt").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"sandbox_permissions": "danger-full-access"},
            "invalid escalation: sandbox_permissions requires a justification",
        ),
        ({"justification": "why"}, "invalid escalation: justification is only valid together with sandbox_permissions"),
        (
            {"sandbox_permissions": "danger-full-access", "justification": "  "},
            "invalid justification: expected a non-empty sentence",
        ),
        (
            {"sandbox_permissions": "read-only", "justification": "x"},
            'invalid arguments: "sandbox_permissions" must be one of ["workspace-write","danger-full-access"]',
        ),
    ],
)
async def test_validation_texts(h: Harness, extra: dict[str, Any], message: str) -> None:
    outcome = await h.call("write", {"file_path": "a.txt", "content": "x", **extra})
    assert text_of(outcome) == f"Error: {message}"
    assert h.events("approval/asked") == []


async def test_blank_justification_alone_is_ignored(h: Harness, tmp_path: Path) -> None:
    assert not (await h.call("write", {"file_path": "a.txt", "content": "x", "justification": " "})).is_error


async def test_same_mode_request_runs_without_asking(h: Harness, tmp_path: Path) -> None:
    args = {"file_path": "a.txt", "content": "x", "sandbox_permissions": "workspace-write", "justification": "why"}
    assert not (await h.call("write", args)).is_error
    assert h.events("approval/asked", "approval/decided") == []


async def test_not_strictly_wider(tmp_path: Path) -> None:
    world = await harness(tmp_path, FS + POLICY[:2] + [("permission", {"mode": "danger-full-access"})], startup=True)
    try:
        args = {"file_path": "a.txt", "content": "x", "sandbox_permissions": "workspace-write", "justification": "j"}
        outcome = await world.call("write", args)
        assert text_of(outcome) == (
            'Error: sandbox escalation to "workspace-write" is not strictly wider than this call\'s current '
            '"danger-full-access" mode'
        )
    finally:
        await world.close()


async def test_edit_escalates_too(h: Harness, outside: Path) -> None:
    target = outside / "e.txt"
    target.write_text("old")
    h.kernel.ctx.require(APPROVAL).add_answerer(h.agent.ctx, lambda request: "allowed-once")
    await h.call("read", {"file_path": str(target)})
    args = {
        "file_path": str(target),
        "old_string": "old",
        "new_string": "new",
        "sandbox_permissions": "danger-full-access",
        "justification": "fix",
    }
    assert not (await h.call("edit", args)).is_error
    assert target.read_text() == "new"


async def test_never_policy_rejects_without_answerers(tmp_path: Path, outside: Path) -> None:
    world = await harness(tmp_path, FS + POLICY, startup=True)
    try:
        asked: list[ApprovalRequest] = []
        world.kernel.ctx.require(APPROVAL).add_answerer(world.agent.ctx, lambda r: asked.append(r) or "allowed-once")
        world.session.append("approval/policy", {"policy": "never"})
        outcome = await world.call("write", escalated(outside / "f.txt"))
        assert "the user rejected escalating this operation" in text_of(outcome)
        assert asked == []
        assert [e["data"]["outcome"] for e in world.events("approval/decided")] == ["rejected"]
    finally:
        await world.close()


async def test_no_approval_service_and_no_agent(tmp_path: Path, outside: Path) -> None:
    world = await harness(tmp_path, [*FS, ("sandbox-policy", None)])
    try:
        outcome = await world.call("write", escalated(outside / "f.txt"))
        assert text_of(outcome) == (
            'Error: sandbox escalation to "danger-full-access" requires approval, but no approval service is composed'
        )
    finally:
        await world.close()
    world = await harness(tmp_path, FS + POLICY)
    try:
        exec = world.exec("write", escalated(outside / "f.txt"))
        exec.agent = None
        assert text_of(await world.run(exec)) == (
            'Error: sandbox escalation to "danger-full-access" requires approval, '
            "but the call has no agent to route it through"
        )
    finally:
        await world.close()
