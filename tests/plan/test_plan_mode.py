"""Plan mode with a scripted model: ``plan/mode`` records, the plan section, ``exit_plan_mode``'s review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydsh.host.agent import Agent
from pydsh.plan.mode import APPROVED, PLAN_MODE
from pydsh.policy.keys import USER_QUESTIONS
from pydsh.policy.questions import Answer, QuestionRequest
from pydsh.testing.hosts import scripted_host

PLAN = "# Fix the parser\n\n1. Read it.\n2. Fix it."


def exit_call(plan: str = PLAN) -> dict[str, Any]:
    return {"tool_calls": [{"name": "exit_plan_mode", "arguments": {"plan": plan}}]}


def results(agent: Agent) -> list[str]:
    return [e["data"]["message"]["content"][0]["text"] for e in agent.events if e["type"] == "tool/result"]


def records(agent: Agent) -> list[dict[str, Any]]:
    return [e["data"] for e in agent.events if e["type"] == "plan/mode"]


def systems(agent: Agent) -> list[str]:
    return [e["data"]["message"]["content"][0]["text"] for e in agent.events if e["type"] == "system/message"]


async def run_review(tmp_path: Path, script: list[Any], answers: list[Answer]) -> tuple[Agent, list[QuestionRequest]]:
    """Switch plan mode on, then run ``script`` with the user answering ``answers`` in turn."""
    asked: list[QuestionRequest] = []

    async def answerer(request: QuestionRequest) -> list[Answer]:
        asked.append(request)
        return [answers[len(asked) - 1]]

    async with scripted_host(script, cwd=tmp_path) as host:
        host.ctx.require(USER_QUESTIONS).add_answerer(host.ctx, answerer)
        agent = await host.create_agent()
        assert host.ctx.require(PLAN_MODE).command(agent.live, "") == {
            "kind": "success",
            "text": "Plan mode on. Use /plan off to leave.",
        }
        await agent.run("plan the fix")
    return agent, asked


async def test_a_rejected_then_approved_plan_leaves_plan_mode(tmp_path: Path) -> None:
    script = [exit_call("no heading"), exit_call(), exit_call(), {"text": "carrying it out"}]
    keep = Answer("plan-review", ("Keep planning",), "split step 2")
    agent, asked = await run_review(tmp_path, script, [keep, Answer("plan-review", ("Approve",))])
    assert results(agent) == [
        "Error: exit_plan_mode requires a non-empty markdown plan starting with a # heading",
        "Error: The user chose to keep planning; their feedback: split step 2",
        APPROVED,
    ]
    assert APPROVED == "Plan approved — plan mode exited; carry out the plan starting with your next step."
    assert records(agent) == [{"active": True}, {"active": False}]
    (question,) = asked[0].questions
    assert question["detail"] == PLAN
    assert question["intent"] == {"kind": "plan-review", "approve": "Approve", "callId": asked[0].call_id}
    assert [o["label"] for o in question["options"]] == ["Approve", "Keep planning"]
    prompts = systems(agent)
    assert "You are in plan mode" in prompts[0]
    assert "You are in plan mode" not in prompts[-1]


async def test_exit_plan_mode_outside_plan_mode_is_refused(tmp_path: Path) -> None:
    async with scripted_host([exit_call(), {"text": "ok"}], cwd=tmp_path) as host:
        agent = await host.create_agent()
        await agent.run("go")
        mode = host.ctx.require(PLAN_MODE)
        assert mode.command(agent.live, "off") == {"kind": "success", "text": "Plan mode is already inactive."}
    assert results(agent) == ["Error: exit_plan_mode is only available in plan mode"]
    assert records(agent) == []
