"""The approval service: logging, decision order, answerers and pre-execute asks (spec 05 §5.7)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pydsh.contract.tools import TOOL_PRE_EXECUTE, ToolExec
from pydsh.kernel import AbortController
from pydsh.policy.approval import Approval, ApprovalRequest
from pydsh.policy.keys import APPROVAL
from tests.tools.harness import FS, POLICY, Harness, harness, text_of


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    world = await harness(tmp_path, FS + POLICY, startup=True)
    yield world
    await world.close()


def approval(h: Harness) -> Approval:
    service: Approval = h.kernel.ctx.require(APPROVAL)
    return service


async def test_request_outside_a_turn_raises_before_logging(tmp_path: Path) -> None:
    world = await harness(tmp_path, POLICY, open_turn=False)
    try:
        with pytest.raises(RuntimeError, match="inside an open turn"):
            await approval(world).request(world.agent, "write")  # type: ignore[arg-type]
        assert world.events("approval/asked") == []
    finally:
        await world.close()


async def test_no_answerer_is_unavailable(h: Harness) -> None:
    outcome = await approval(h).request(h.agent, "bash", call_id="c1", reason="why")  # type: ignore[arg-type]
    assert outcome == "unavailable"
    asked, decided = h.events("approval/asked", "approval/decided")
    assert asked["data"] == {"id": asked["data"]["id"], "toolName": "bash", "callId": "c1", "reason": "why"}
    assert decided["data"] == {"id": asked["data"]["id"], "outcome": "unavailable"}


async def test_aborted_signal_is_cancelled_without_asking(h: Harness) -> None:
    asked: list[ApprovalRequest] = []
    approval(h).add_answerer(h.agent.ctx, lambda r: asked.append(r) or "allowed-once")
    controller = AbortController()
    controller.abort("stop")
    assert await approval(h).request(h.agent, "t", signal=controller.signal) == "cancelled"  # type: ignore[arg-type]
    assert asked == []


async def test_abort_while_waiting_is_cancelled(h: Harness) -> None:
    started = asyncio.Event()

    async def slow(request: ApprovalRequest) -> str:
        started.set()
        await asyncio.sleep(30)
        return "allowed-once"

    approval(h).add_answerer(h.agent.ctx, slow)
    controller = AbortController()
    task = asyncio.create_task(approval(h).request(h.agent, "t", signal=controller.signal))  # type: ignore[arg-type]
    await started.wait()
    controller.abort("stop")
    assert await task == "cancelled"
    assert [e["data"]["outcome"] for e in h.events("approval/decided")] == ["cancelled"]


async def test_answerers_delegate_and_fail_closed(h: Harness) -> None:
    service = approval(h)
    calls: list[str] = []

    def first(request: ApprovalRequest) -> None:
        calls.append("first")

    async def second(request: ApprovalRequest) -> str:
        calls.append("second")
        return "rejected"

    service.add_answerer(h.agent.ctx, first)
    dispose = service.add_answerer(h.agent.ctx, second)
    assert await service.request(h.agent, "t") == "rejected"  # type: ignore[arg-type]
    assert calls == ["first", "second"]
    dispose()

    def broken(request: ApprovalRequest) -> str:
        raise RuntimeError("answerer crashed")

    service.add_answerer(h.agent.ctx, broken)
    assert await service.request(h.agent, "t") == "unavailable"  # type: ignore[arg-type]


async def test_answerers_are_scoped_to_their_agent(h: Harness, tmp_path: Path) -> None:
    other = await harness(tmp_path, POLICY)
    try:
        approval(other).add_answerer(other.agent.ctx, lambda r: "allowed-once")
        assert await approval(other).request(other.agent, "t") == "allowed-once"  # type: ignore[arg-type]
        assert await approval(h).request(h.agent, "t") == "unavailable"  # type: ignore[arg-type]
    finally:
        await other.close()


async def test_pre_execute_ask_lets_exactly_the_allowed_call_through(h: Harness, tmp_path: Path) -> None:
    async def ask_for_writes(exec: ToolExec, next: Any) -> Any:
        if exec.name == "write":
            return {"kind": "ask", "reason": "hook asks"}
        return await next()

    answers = iter(["allowed-once", "rejected", "cancelled"])
    h.kernel.ctx.on(TOOL_PRE_EXECUTE, ask_for_writes)
    approval(h).add_answerer(h.agent.ctx, lambda r: next(answers))
    assert not (await h.call("write", {"file_path": "a.txt", "content": "1"})).is_error
    rejected = await h.call("write", {"file_path": "b.txt", "content": "2"})
    assert text_of(rejected) == 'Error: the user rejected tool "write"'
    cancelled = await h.call("write", {"file_path": "c.txt", "content": "3"})
    assert text_of(cancelled) == 'Error: approval for tool "write" was cancelled'
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".txt"] == ["a.txt"]
    assert [e["data"]["reason"] for e in h.events("approval/asked")] == ["hook asks"] * 3


async def test_policy_context_texts(h: Harness) -> None:
    service = approval(h)
    assert service.context_text(h.agent) == (  # type: ignore[arg-type]
        "Approval prompts are enabled in this session: operations that require approval may ask through the "
        "configured answerers; without an available answerer, the request fails closed."
    )
    h.session.append("approval/policy", {"policy": "never"})
    assert service.context_text(h.agent) == (  # type: ignore[arg-type]
        "Approval prompts are disabled in this session: actions that require approval are rejected automatically "
        "— do not request sandbox escalation (do not set `sandbox_permissions`)."
    )
    assert service.context_text(None) is None
