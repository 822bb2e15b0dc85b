"""The loop's companions (spec 03 §12.1–2) fail loudly instead of passing for a model failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.agent import user_message
from pydsh.kernel.invariants import InvariantError
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

    host.kernel.ctx.on("llm/stream", append_after_build, prepend=True)
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

    host.kernel.ctx.on("llm/stream", mutate)
    events = await host.run(agent, "go")
    assert refused == ["logged event data is immutable"] * 2
    assert "assistant/message" in types(events)
    await host.close()
