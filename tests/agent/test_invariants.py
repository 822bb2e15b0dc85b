"""The loop's companions (spec 03 §12.1–2) fail loudly instead of passing for a model failure."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.hooks import PRE_STEP
from pydsh.contract.agent import user_message
from pydsh.kernel.invariants import InvariantError
from pydsh.llm.hooks import LLM_STREAM
from pydsh.session.events import FrozenDict
from pydsh.testing.fixtures import Violations
from tests.agent.harness import start_host, types


async def test_a_request_changed_after_it_was_built_is_a_violation_not_a_model_failure(
    tmp_path: Path, violations: Violations
) -> None:
    host = await start_host([{"text": "never sent"}])
    agent = (await host.create(tmp_path)).agent
    seen: list[Any] = []

    async def append_after_build(options: dict[str, Any], nxt: Any) -> Any:
        seen.append(options)
        agent.session.append("user/message", user_message("slipped in"), surface_op="append")
        return await nxt()

    host.kernel.ctx.on(LLM_STREAM, append_after_build, before=LLM_STREAM.order)
    events = await host.run(agent, "go")
    violation = f"[agent-loop] session {agent.id}: request messages differ from derive_messages()"
    assert violations.take() == [violation]
    assert types(events).count("assistant/attempt") == 1
    [attempt] = [e for e in events if e["type"] == "assistant/attempt"]
    assert attempt["data"]["stream"] == []
    [end] = [e for e in events if e["type"] == "turn/end"]
    assert end["data"]["reason"]["kind"] == "error"
    assert end["data"]["reason"]["error"]["message"] == violation
    assert len(seen) == 1 and isinstance(seen[0], FrozenDict)
    with pytest.raises(ExceptionGroup):
        await host.close()


async def test_a_status_seen_twice_in_a_row_raises_from_the_emitter(tmp_path: Path, violations: Violations) -> None:
    echo = [{"insert": [{"id": "status-echo", "name": "tests.kernel.status_echo"}]}]
    host = await start_host([{"text": "hi"}], patches=(echo,))
    agent = (await host.create(tmp_path)).agent
    with pytest.raises(InvariantError, match=f"^\\[agent-loop\\] agent {agent.id} emitted status 'running' twice"):
        agent.followup(user_message("go"))
    assert len(violations.take()) == 1
    with pytest.raises(ExceptionGroup):
        await host.close()


async def test_the_loop_built_request_is_frozen(tmp_path: Path) -> None:
    host = await start_host([{"text": "hi"}])
    agent = (await host.create(tmp_path)).agent
    refused: list[str] = []

    async def mutate(options: dict[str, Any], nxt: Any) -> Any:
        for change in (lambda: options["messages"].append({}), lambda: options.update(model="other")):
            try:
                change()
            except TypeError as exc:
                refused.append(str(exc))
        return await nxt()

    host.kernel.ctx.on(LLM_STREAM, mutate)
    events = await host.run(agent, "go")
    assert refused == ["logged event data is immutable"] * 2
    assert "assistant/message" in types(events)
    await host.close()


# -- progress: the loop never feeds itself ---------------------------------------------------------


def note_every_step(host: Any) -> None:
    """A pre-step listener that queues a note at every step, as the vanished-directory recovery once did."""

    async def note(payload: dict[str, Any], nxt: Any) -> Any:
        payload["agent"].inject(user_message("a note the runtime wrote for itself", {"kind": "working-directory"}))
        return await nxt()

    host.kernel.ctx.on(PRE_STEP, note)


async def test_input_an_agent_queues_for_itself_while_preparing_rides_along_and_starts_no_step(tmp_path: Path) -> None:
    host = await start_host([{"text": "one"}, {"text": "two"}])
    agent = (await host.create(tmp_path)).agent
    note_every_step(host)
    first = await host.run(agent, "go")
    assert types(first).count("step/start") == 1
    assert [e["data"]["reason"]["kind"] for e in first if e["type"] == "turn/end"] == ["completed"]
    second = await host.run(agent, "again")
    texts = [e["data"]["content"][0]["text"] for e in second if e["type"] == "user/message"]
    assert texts[:2] == ["a note the runtime wrote for itself", "again"]
    assert types(second).count("step/start") == 1
    await host.close()


async def test_a_loop_that_steps_on_its_own_input_is_a_violation(
    tmp_path: Path, violations: Violations, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The companion checks the loop from outside: were the loop to step on any pending input again, the
    note-every-step listener would keep it calling the model, and the companion ends the turn instead."""
    from pydsh.agent.loop import LoopAgent

    monkeypatch.setattr(LoopAgent, "_step_input", lambda self: bool(self.inbox.next_step))
    host = await start_host([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    agent = (await host.create(tmp_path)).agent
    note_every_step(host)
    events = await host.run(agent, "go")
    [violation] = violations.take()
    assert violation.startswith(f"[agent-loop] agent {agent.id} took step 2 of turn 1 only on input it queued")
    [end] = [e for e in events if e["type"] == "turn/end"]
    assert end["data"]["reason"]["kind"] == "error"
    assert types(events).count("assistant/message") == 1
    with pytest.raises(ExceptionGroup):
        await host.close()


async def test_input_from_outside_or_after_tool_calls_continues_the_turn(tmp_path: Path) -> None:
    """Steering from another task, and a note beside tool results, are progress: no violation."""
    script = [
        {"tool_calls": [{"name": "working_directory", "arguments": {"cd": "sub"}}]},
        {"text": "in sub"},
        {"text": "steered"},
    ]
    (tmp_path / "sub").mkdir()
    host = await start_host(script)
    agent = (await host.create(tmp_path)).agent
    calls = 0

    async def steer_in_step_two(options: dict[str, Any], nxt: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            asyncio.get_running_loop().call_soon(agent.steer, user_message("and then this"))
            await asyncio.sleep(0.01)
        return await nxt()

    host.kernel.ctx.on(LLM_STREAM, steer_in_step_two)
    events = await host.run(agent, "go")
    assert [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"] == ["completed"]
    assert types(events).count("step/start") == 3
    await host.close()


async def test_a_vanished_workspace_gets_one_note_and_the_turn_ends(tmp_path: Path) -> None:
    """The directory recovery notes a change once; with the workspace itself gone it has nothing to say."""
    workspace = tmp_path / "work"
    (workspace / "sub").mkdir(parents=True)
    script = [{"tool_calls": [{"name": "working_directory", "arguments": {"cd": "sub"}}]}, {"text": "a"}, {"text": "b"}]
    host = await start_host(script)
    agent = (await host.create(workspace)).agent
    await host.run(agent, "enter sub")
    (workspace / "sub").rmdir()
    workspace.rmdir()
    events = await host.run(agent, "still there?")
    notes = [e for e in events if e["type"] == "working-directory/change"]
    assert [n["data"]["cwd"] for n in notes] == [str(workspace)]
    assert [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"] == ["completed"]
    assert types(events).count("step/start") == 1
    await host.close()
