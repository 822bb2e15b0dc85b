"""Goals and plan mode on the SDK wire, against DeepSeek Harness 0.2.1rc2 (issue 27).

Both runtimes serve the same scripted model: a goal created in a human turn runs its automatic round, in
which the model completes it; the notifications each runtime sends are reduced to what a client follows
(statuses, turns, prompts by source, goal changes) and compared. A session pydsh wrote with a paused goal
and plan mode on resumes in either runtime: ``get_goal`` there sees pydsh's goal, the plan section and the
switch notice reach the model, and the plan review answers as the reference's ``sdk`` profile does (it has
no question answerer).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pydsh
from pydsh.host.commands import plan_command
from pydsh.sdk.client import AsyncHarness, Notification
from pydsh.testing.mock_model_server import MockModelServer
from tests.sdk.reference import REFERENCE, needs_reference

GOAL_ID = re.compile(r"goal-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ROUNDS = [
    {"tool_calls": [{"name": "create_goal", "arguments": {"objective": "Tidy the notes", "max_goal_rounds": 3}}]},
    {"text": "Goal set."},
    {"tool_calls": [{"name": "update_goal", "arguments": {"goal_id": "GOAL", "revision": 1, "action": "complete"}}]},
    {"text": "All done."},
]
PAUSED = [
    {"tool_calls": [{"name": "create_goal", "arguments": {"objective": "Tidy the notes", "max_goal_rounds": 5}}]},
    {"tool_calls": [{"name": "update_goal", "arguments": {"goal_id": "GOAL", "revision": 1, "action": "pause"}}]},
    {"text": "Paused."},
]
RESUMED = [
    {"tool_calls": [{"name": "get_goal", "arguments": {}}]},
    {"tool_calls": [{"name": "exit_plan_mode", "arguments": {"plan": "# Tidy plan\n\n1. Sort the notes"}}]},
    {"text": "Resumed fine."},
]


def scripted(items: list[dict[str, Any]]) -> Callable[[dict[str, Any]], Any]:
    """The model: ``items`` in order, ``"GOAL"`` replaced by the latest goal id the request shows; a title
    request (no tools) gets a title."""
    queue = list(items)

    def choose(body: dict[str, Any]) -> Any:
        if not body.get("tools"):
            return {"text": "A title"}
        text = json.dumps(queue.pop(0) if queue else {"text": "unscripted"})
        found = GOAL_ID.findall(json.dumps(body))
        return json.loads(text.replace('"GOAL"', json.dumps(found[-1])) if found else text)

    return choose


def settings(tmp_path: Path, reference: bool) -> dict[str, Any]:
    workspace = tmp_path / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {"dsh_home": str(tmp_path / "home"), "cwd": str(workspace), "api_key": "sk-test"}
    return found | ({"dsh_bin": REFERENCE} if reference else {})


def milestone(note: Notification) -> str | None:
    """What a client follows of one notification, with ids and times left out; ``None`` for the rest."""
    if note.method == "session.status":
        return f"status {note.payload['status']}"
    event = note.payload.get("event") if note.method == "session.event" else None
    if event is None:
        return None
    data = event["data"]
    if event["type"] in ("turn/start", "turn/end"):
        return f"{event['type']} {data.get('reason', {}).get('kind', '')}".strip()
    if event["type"] == "goal/change":
        goal = data["goal"]
        return f"goal {data['operation']} {goal['phase']} r{goal['revision']} rounds={data['roundsStarted']}"
    source = data.get("source") or {}
    if event["type"] == "user/message" and source.get("kind") in ("user", "goal", "tool-goal"):
        text = data["content"][0]["text"]
        return f"prompt {source['kind']} round={source.get('round')}: {GOAL_ID.sub('GOAL', text)}"
    return None


async def goal_rounds(tmp_path: Path, reference: bool) -> list[str]:
    """The milestones of a goal created, run for one round and completed, in one runtime."""
    notes: list[Notification] = []
    server = MockModelServer(choose=scripted(ROUNDS))
    async with server, AsyncHarness(base_url=server.base_url, **settings(tmp_path, reference)) as harness:
        with harness.client.subscribe() as subscription:
            await harness.session("g1").run("Keep going until the notes are tidy")

            async def until_round_ends() -> None:
                """Read on until the round's turn ended and the session went idle again."""
                while True:
                    notes.append(await subscription.next())
                    ended = sum(milestone(n) == "turn/end completed" for n in notes)
                    if ended == 2 and milestone(notes[-1]) == "status idle":
                        return

            await asyncio.wait_for(until_round_ends(), 60)
    return [m for m in map(milestone, notes) if m is not None]


ROUND_MILESTONES = [
    "status running",
    "turn/start",
    "goal create active r1 rounds=0",
    "turn/end completed",
    "status idle",
    "status running",
    "turn/start",
    "goal complete complete r2 rounds=1",
    "turn/end completed",
    "status idle",
]


async def test_the_sdk_stream_shows_a_goal_s_round_and_its_completion(tmp_path: Path) -> None:
    found = await goal_rounds(tmp_path, reference=False)
    prompts = [m for m in found if m.startswith("prompt ")]
    assert [m for m in found if not m.startswith("prompt ")] == ROUND_MILESTONES
    assert prompts[0] == "prompt user round=None: Keep going until the notes are tidy"
    assert prompts[1].startswith('prompt goal round=1: <goal_round>\nObjective: "Tidy the notes"\nRound: 1/3\n')
    assert prompts[2].startswith('prompt tool-goal round=None: <goal_complete>\nObjective: "Tidy the notes"\n')


@needs_reference
async def test_the_sdk_stream_of_a_goal_round_is_the_reference_s(tmp_path: Path) -> None:
    theirs = await goal_rounds(tmp_path / "reference", reference=True)
    ours = await goal_rounds(tmp_path / "pydsh", reference=False)
    assert ours == theirs


async def write_paused_goal_in_plan_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pydsh (the ``sdk`` profile, embedded) writes session ``g1``: a goal created and paused at the human's
    request, then plan mode switched on by the human while the session is idle."""
    where = settings(tmp_path, reference=False)
    async with MockModelServer(choose=scripted(PAUSED)) as server:
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
        async with pydsh.open_host("sdk", cwd=where["cwd"], dsh_home=where["dsh_home"]) as host:
            agent = await host.create_agent(session_id="g1")
            await agent.run("Keep going until the notes are tidy, but pause the goal for now")
            assert plan_command(agent, "") == {"kind": "success", "text": "Plan mode on. Use /plan off to leave."}
            await agent.settle()


def tool_result_text(body: dict[str, Any]) -> str:
    """The text of the tool result a request ends with."""
    [block] = body["messages"][-1]["content"]
    return str(block["content"][0]["text"])


@pytest.mark.parametrize("runtime", ["pydsh", pytest.param("reference", marks=needs_reference)])
async def test_a_pydsh_session_with_a_goal_and_plan_mode_resumes_and_its_goal_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: str
) -> None:
    await write_paused_goal_in_plan_mode(tmp_path, monkeypatch)
    async with MockModelServer(choose=scripted(RESUMED)) as server:
        async with AsyncHarness(base_url=server.base_url, **settings(tmp_path, runtime == "reference")) as harness:
            session = await harness.resume_session("g1")
            result = await session.run("Where are we?")
        bodies = [r["body"] for r in server.requests if r["body"].get("tools")]
    assert result.final_response == "Resumed fine." and result.finish_reason == "completed"
    first = bodies[0]
    assert "You are in plan mode" in json.dumps(first["system"])
    assert first["messages"][-1]["content"][0] == {
        "type": "text",
        "text": "The user switched this session to plan mode.",
    }
    goal = json.loads(tool_result_text(bodies[1]))
    assert GOAL_ID.fullmatch(goal["goal"].pop("id"))
    assert goal == {
        "goal": {
            "revision": 2,
            "objective": "Tidy the notes",
            "phase": "paused",
            "roundsStarted": 0,
            "maxGoalRounds": 5,
        },
        "activation": "disarmed",
    }
    assert tool_result_text(bodies[2]) == "Error: no user-questions answerer accepted the request"
