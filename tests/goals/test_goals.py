"""Goals end to end with a scripted model: tool results and errors, ``goal/change`` records, rounds, resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.keys import AGENTS
from pydsh.goals import service as goal_service
from pydsh.goals.command import INVALID, USAGE, missing, run_goal_command
from pydsh.goals.driver import round_prompt
from pydsh.goals.keys import GOALS
from pydsh.host.agent import Agent as HostedAgent
from pydsh.session.hooks import SESSION_EVENT
from pydsh.subagents.keys import SUBAGENTS
from pydsh.testing.hosts import scripted_host

GOAL_ID = "goal-00000000-0000-4000-8000-000000000001"


@pytest.fixture(autouse=True)
def fixed_goal_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal ids are random; the scripts name this one."""
    monkeypatch.setattr(goal_service, "new_goal_id", lambda: GOAL_ID)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def update(revision: int, action: str, **extra: Any) -> dict[str, Any]:
    return call("update_goal", goal_id=GOAL_ID, revision=revision, action=action, **extra)


def results(agent: HostedAgent) -> list[str]:
    """The text of every tool result, in order."""
    return [e["data"]["message"]["content"][0]["text"] for e in agent.events if e["type"] == "tool/result"]


def changes(agent: HostedAgent) -> list[dict[str, Any]]:
    return [e["data"] for e in agent.events if e["type"] == "goal/change"]


async def settled(agent: HostedAgent, phase: str) -> None:
    """Wait until the goal reaches ``phase`` and the agent is idle again."""

    async def poll() -> None:
        while not changes(agent) or changes(agent)[-1].get("goal", {}).get("phase") != phase:
            await asyncio.sleep(0.01)
        await agent.live.when_idle()

    await asyncio.wait_for(poll(), 30)


def snapshot(
    revision: int, phase: str, rounds: int, cap: int, activation: str, objective: str = "make tests pass"
) -> str:
    goal = {"id": GOAL_ID, "revision": revision, "objective": objective, "phase": phase}
    value = {"goal": {**goal, "roundsStarted": rounds, "maxGoalRounds": cap}, "activation": activation}
    return json.dumps(value, separators=(",", ":"))


async def test_a_goal_runs_rounds_until_the_model_marks_it_complete(tmp_path: Path) -> None:
    script = [
        call("create_goal", objective="make tests pass", max_goal_rounds=3),
        update(1, "complete", objective="other"),
        call("create_goal", objective="again"),
        call("get_goal"),
        {"text": "first turn done"},
        update(1, "blocked", blocked_reason="no network"),
        update(1, "pause"),
        update(1, "complete"),
        {"text": "closing message"},
    ]
    async with scripted_host(script, cwd=tmp_path) as host:
        agent = await host.create_agent()
        await agent.run("start the goal")
        await settled(agent, "complete")
        host.assert_consumed()  # type: ignore[attr-defined]
    assert results(agent) == [
        snapshot(1, "active", 0, 3, "armed"),
        "Error: objective and max_goal_rounds are valid only with action edit",
        f'Error: goal "{GOAL_ID}" already exists with phase "active"',
        snapshot(1, "active", 0, 3, "armed"),
        "Error: blocked requires at least 3 consecutive goal rounds; current round is 1",
        "Error: this goal operation requires a direct human turn on a top-level agent",
        snapshot(2, "complete", 1, 3, "disarmed"),
    ]
    created, completed = changes(agent)
    assert created == {
        "kind": "goal/change",
        "version": 1,
        "operation": "create",
        "goal": {"id": GOAL_ID, "revision": 1, "objective": "make tests pass", "phase": "active", "maxGoalRounds": 3},
        "roundsStarted": 0,
        "createdAt": created["createdAt"],
        "updatedAt": created["createdAt"],
    }
    assert completed["operation"] == "complete" and completed["roundsStarted"] == 1
    assert completed["goal"] == {**created["goal"], "revision": 2, "phase": "complete"}
    prompts = [e["data"] for e in agent.events if e["type"] == "user/message"]
    goal = {"objective": "make tests pass", "maxGoalRounds": 3}
    round_one = next(p for p in prompts if p["source"]["kind"] == "goal")
    assert round_one["source"] == {"kind": "goal", "goalId": GOAL_ID, "revision": 1, "round": 1}
    assert round_one["content"][0]["text"] == round_prompt(goal, 1)
    assert round_prompt(goal, 1).startswith('<goal_round>\nObjective: "make tests pass"\nRound: 1/3\n\nContinue')
    notice = prompts[-1]
    assert notice["source"] == {"kind": "tool-goal", "form": "notice", "summary": "complete: make tests pass"}
    assert notice["content"][0]["text"].startswith('<goal_complete>\nObjective: "make tests pass"\nThe goal is marked')
    ends = [e["data"]["turn"] for e in agent.events if e["type"] == "turn/end"]
    assert ends == [1, 2]


async def test_the_round_budget_blocks_the_goal(tmp_path: Path) -> None:
    script = [call("create_goal", objective="make tests pass", max_goal_rounds=2), {"text": "t1"}, {"text": "r1"}]
    script.append({"text": "r2"})
    async with scripted_host(script, cwd=tmp_path) as host:
        agent = await host.create_agent()
        kept_at_turn_ends: list[bool] = []

        def on_event(session: Any, event: dict[str, Any]) -> None:
            if event["type"] == "turn/end":
                kept_at_turn_ends.append(host.registry.kept(agent.live))

        host.ctx.on(SESSION_EVENT, on_event)
        await agent.run("start")
        assert kept_at_turn_ends[0], "a frontend could let go of an agent before its goal's next round"
        await settled(agent, "blocked")
        assert not host.registry.kept(agent.live)
        host.assert_consumed()  # type: ignore[attr-defined]
    blocked = changes(agent)[-1]
    assert blocked["operation"] == "block"
    assert blocked["roundsStarted"] == 2
    assert blocked["goal"] == {
        "id": GOAL_ID,
        "revision": 2,
        "objective": "make tests pass",
        "phase": "blocked",
        "maxGoalRounds": 2,
        "blockedReason": {"code": "round-limit", "message": "Goal reached its configured limit of 2 rounds."},
    }
    sources = [e["data"]["source"] for e in agent.events if e["type"] == "user/message"]
    assert [s.get("round") for s in sources if s["kind"] in ("user", "goal")] == [None, 1, 2]


async def test_a_resumed_goal_waits_for_a_human_to_resume_it(tmp_path: Path) -> None:
    first = [call("create_goal", objective="make tests pass", max_goal_rounds=1), {"text": "t1"}, {"text": "r1"}]
    async with scripted_host(first, cwd=tmp_path, dsh_home=tmp_path / "home") as host:
        agent = await host.create_agent()
        await agent.run("start")
        await settled(agent, "blocked")
        session_id = agent.session_id
    second = [call("get_goal"), {"text": "idle"}]
    async with scripted_host(second, cwd=tmp_path, dsh_home=tmp_path / "home") as host:
        resumed = await host.resume_agent(session_id)
        await resumed.run("status?")
        host.assert_consumed()  # type: ignore[attr-defined]
    blocked = snapshot(2, "blocked", 1, 1, "disarmed")
    value = json.loads(blocked)
    value["goal"]["blockedReason"] = {
        "code": "round-limit",
        "message": "Goal reached its configured limit of 1 rounds.",
    }
    assert results(resumed)[-1] == json.dumps(value, separators=(",", ":"))


async def test_the_goal_command_creates_shows_and_clears(tmp_path: Path) -> None:
    script = [{"text": "hello"}, update(1, "complete"), {"text": "all done"}]
    async with scripted_host(script, cwd=tmp_path) as host:
        agent = await host.create_agent()
        goals = host.ctx.require(GOALS)
        assert run_goal_command(goals, agent.live, "") == {
            "kind": "success",
            "text": f"No goal is currently set.\n{USAGE}",
        }
        await agent.run("hi")
        created = run_goal_command(goals, agent.live, "make tests pass")
        assert created["text"].splitlines() == [
            "Goal created",
            "Status: active",
            "Objective: make tests pass",
            "Rounds: 0/256",
            "Activation: armed",
            "Commands: /goal edit <objective>, /goal pause, /goal clear",
        ]
        await settled(agent, "complete")
        host.assert_consumed()  # type: ignore[attr-defined]
        assert run_goal_command(goals, agent.live, "pause") == {"kind": "error", "text": INVALID}
        assert run_goal_command(goals, agent.live, "edit") == {
            "kind": "error",
            "text": f"Goal editing requires a replacement objective.\n{USAGE}",
        }
        assert run_goal_command(goals, agent.live, "clear") == {"kind": "success", "text": "Goal cleared."}
        assert run_goal_command(goals, agent.live, "resume") == missing("resume")
    cleared = changes(agent)[-1]
    assert cleared == {
        "kind": "goal/change",
        "version": 1,
        "operation": "clear",
        "cleared": {"id": GOAL_ID, "revision": 3},
        "clearedAt": cleared["clearedAt"],
    }


async def until(predicate: Any) -> None:
    """Wait until ``predicate()`` holds (the log and the agents advance on the same loop)."""

    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 30)


def turn_ends(agent: HostedAgent) -> list[str]:
    return [e["data"]["reason"]["kind"] for e in agent.events if e["type"] == "turn/end"]


def prompt_kinds(agent: HostedAgent) -> list[str]:
    """The source kinds of the prompts that started or joined turns, runtime context left out."""
    kinds = [e["data"]["source"]["kind"] for e in agent.events if e["type"] == "user/message"]
    return [k for k in kinds if k != "runtime-context"]


async def test_a_human_pause_stops_the_running_round_and_no_round_follows(tmp_path: Path) -> None:
    ready = tmp_path / "round-hangs"
    script = [call("create_goal", objective="make tests pass", max_goal_rounds=3), {"text": "t1"}]
    script.append({"hang": {"readyFile": str(ready)}})
    async with scripted_host(script, cwd=tmp_path) as host:
        agent = await host.create_agent()
        run = asyncio.create_task(agent.run("start"))  # the run lasts as long as the rounds
        await until(ready.exists)
        paused = run_goal_command(host.ctx.require(GOALS), agent.live, "pause")
        assert paused["kind"] == "success"
        await asyncio.wait_for(run, 30)
        host.assert_consumed()  # type: ignore[attr-defined]
    assert [c["goal"]["phase"] for c in changes(agent)] == ["active", "paused"]
    assert turn_ends(agent) == ["completed", "aborted"]


async def test_the_model_s_own_pause_does_not_stop_its_turn(tmp_path: Path) -> None:
    script = [call("create_goal", objective="make tests pass"), update(1, "pause"), {"text": "paused it"}]
    async with scripted_host(script, cwd=tmp_path) as host:
        agent = await host.create_agent()
        await agent.run("start, then pause the goal")
        host.assert_consumed()  # type: ignore[attr-defined]
    assert results(agent)[1] == snapshot(2, "paused", 0, 256, "disarmed")
    assert turn_ends(agent) == ["completed"]


async def test_a_round_waits_for_the_subagents_still_running(tmp_path: Path) -> None:
    ready = tmp_path / "child-hangs"
    delegate = {"name": "subagent", "arguments": {"description": "count", "prompt": "Count slowly"}}
    create = {"name": "create_goal", "arguments": {"objective": "make tests pass", "max_goal_rounds": 3}}
    lead = [{"tool_calls": [create, delegate]}, {"text": "t1"}, {"text": "read the child"}, update(1, "complete")]
    child = [{"hang": {"readyFile": str(ready)}}]
    async with scripted_host([[*lead, {"text": "done"}], child], cwd=tmp_path) as host:
        agent = await host.create_agent()
        run = asyncio.create_task(agent.run("start"))  # the run lasts as long as the child and the rounds
        await until(lambda: ready.exists() and turn_ends(agent) == ["completed"] and agent.live.status == "idle")
        [activation] = host.ctx.require(SUBAGENTS).descendants(agent.session_id)
        host.ctx.require(AGENTS).get(activation.child_id).cancel({"kind": "user"})
        await asyncio.wait_for(run, 30)
        await settled(agent, "complete")
        host.assert_consumed()  # type: ignore[attr-defined]
    assert prompt_kinds(agent) == ["user", "subagent-settled", "goal", "tool-goal"]  # the child's end, then the round


async def test_a_round_the_user_stops_pauses_its_goal(tmp_path: Path) -> None:
    ready = tmp_path / "round-hangs"
    script = [call("create_goal", objective="make tests pass", max_goal_rounds=3), {"text": "t1"}]
    script += [{"hang": {"readyFile": str(ready)}}, {"text": "hello again"}]
    async with scripted_host(script, cwd=tmp_path) as host:
        agent = await host.create_agent()
        run = asyncio.create_task(agent.run("start"))
        await until(ready.exists)
        agent.live.cancel({"kind": "user"})  # the user's stop
        await asyncio.wait_for(run, 30)
        await until(lambda: len(changes(agent)) == 2)
        await agent.run("a plain turn")  # no round follows it: the goal waits for a human's resume
        host.assert_consumed()  # type: ignore[attr-defined]
    paused = changes(agent)[-1]
    assert paused["operation"] == "pause" and paused["roundsStarted"] == 1
    assert paused["goal"] == {**changes(agent)[0]["goal"], "revision": 2, "phase": "paused"}
    assert turn_ends(agent) == ["completed", "aborted", "completed"]


async def test_a_plain_turn_the_user_stops_only_disarms_the_goal(tmp_path: Path) -> None:
    ready = tmp_path / "turn-hangs"
    script = [call("create_goal", objective="make tests pass"), {"hang": {"readyFile": str(ready)}}]
    async with scripted_host(script, cwd=tmp_path) as host:
        agent = await host.create_agent()
        run = asyncio.create_task(agent.run("start"))
        await until(ready.exists)
        agent.live.cancel({"kind": "user"})
        await asyncio.wait_for(run, 30)
        host.assert_consumed()  # type: ignore[attr-defined]
        goal = host.ctx.require(GOALS).get(agent.live)
    assert [c["operation"] for c in changes(agent)] == ["create"]
    assert goal is not None and goal["phase"] == "active" and goal["activation"] == "disarmed"
