"""The turn/step algorithm, inbox routing, continuation, scheduling, cancellation and request records."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.hooks import AGENT_STATUS, PRE_STEP
from pydsh.agent.keys import AGENTS
from pydsh.agent.loop import LoopAgent
from pydsh.contract.agent import user_message
from pydsh.contract.tools import TOOL_POST_EXECUTE, TOOLS, ToolDefinition, ToolExec
from pydsh.llm.hooks import LLM_STREAM
from tests.agent.harness import Host, start_host, types

OBJ = {"type": "object", "properties": {"v": {"type": "string"}}}


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def register(host: Host, name: str, body: Any, *, parallel: bool = False) -> None:
    tools = host.kernel.ctx.require(TOOLS)
    tools.register(
        host.kernel.ctx,
        ToolDefinition(
            name=name,
            description=f"test tool {name}",
            parameters=OBJ,
            execute=body,
            is_concurrency_safe=(lambda args: True) if parallel else None,
        ),
    )


@pytest.fixture
async def host_factory(tmp_path: Path):  # type: ignore[no-untyped-def]
    hosts: list[Host] = []

    async def make(scripts: list[Any], **kw: Any) -> tuple[Host, LoopAgent]:
        host = await start_host(scripts, **kw)
        hosts.append(host)
        handle = await host.create(tmp_path)
        return host, handle.agent

    yield make
    for host in hosts:
        await host.close()


async def test_text_turn_event_order(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"text": "hello back"}])
    await host.run(agent, "hi there")
    assert types(agent.session.events)[-13:] == [
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "system/message",
        "user/message",
        "user/message",
        "request/header",
        "request/context",
        "session/title",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    end = agent.session.events[-1]["data"]
    assert end == {"turn": 1, "reason": {"kind": "completed"}}
    header = next(e for e in agent.session.events if e["type"] == "request/header")["data"]
    assert header["reason"] == "initial"
    assert header["header"]["config"] == {"provider": "deepseek-official", "model": "deepseek-v4-flash"}
    host.replay.assert_consumed()


async def test_tool_calls_continue_the_turn_and_results_commit_in_model_order(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory(
        [{"tool_calls": [call("slow", v="a"), call("fast", v="b"), call("fast", v="c")]}, {"text": "done"}]
    )

    async def slow(args: Any, exec: ToolExec) -> str:
        await asyncio.sleep(0.05)
        return f"slow {args['v']}"

    async def fast(args: Any, exec: ToolExec) -> str:
        return f"fast {args['v']}"

    register(host, "slow", slow, parallel=True)
    register(host, "fast", fast, parallel=True)
    events = await host.run(agent, "go")
    assert types(events)[types(events).index("assistant/message") :][:8] == [
        "assistant/message",
        "tool/call",
        "tool/call",
        "tool/call",
        "tool/result",
        "tool/result",
        "tool/result",
        "step/end",
    ]
    calls = [e for e in events if e["type"] == "tool/call"]
    results = [e for e in events if e["type"] == "tool/result"]
    assert [r["data"]["message"]["toolCallId"] for r in results] == [c["data"]["callId"] for c in calls]
    assert [r["sourceEventSeqs"] for r in results] == [[c["seq"]] for c in calls]
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


async def test_pool_is_bounded_and_exclusive_calls_are_barriers(host_factory) -> None:  # type: ignore[no-untyped-def]
    batch = [call("par", v=str(i)) for i in range(4)] + [call("excl", v="x")] + [call("par", v="z")]
    host, agent = await host_factory(
        [{"tool_calls": batch}, {"text": "ok"}],
        patches=([{"id": "agent-loop", "config": {"maxParallelToolCalls": 2}}],),
    )
    running = 0
    peak = 0
    log: list[str] = []

    async def par(args: Any, exec: ToolExec) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        log.append(f"start {args['v']}")
        await asyncio.sleep(0.01)
        running -= 1
        return "ok"

    async def excl(args: Any, exec: ToolExec) -> str:
        log.append(f"excl running={running}")
        return "ok"

    register(host, "par", par, parallel=True)
    register(host, "excl", excl)
    await host.run(agent, "go")
    assert peak == 2
    assert "excl running=0" in log
    assert log.index("excl running=0") > log.index("start 3")
    assert log.index("start z") > log.index("excl running=0")


async def test_unknown_tool_and_bad_json_do_not_end_the_turn(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory(
        [{"tool_calls": [call("nope_tool")]}, {"text": "recovered"}],
    )
    events = await host.run(agent, "go")
    result = next(e for e in events if e["type"] == "tool/result")["data"]
    assert result["message"]["content"] == [{"type": "text", "text": 'Error: unknown tool "nope_tool"'}]
    assert result["error"] == {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


async def test_additional_contexts_enter_the_next_step_after_step_start(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"tool_calls": [call("ctx_tool")]}, {"text": "fine"}])
    tools = host.kernel.ctx.require(TOOLS)

    async def body(args: Any, exec: ToolExec) -> str:
        return "x"

    tools.register(
        host.kernel.ctx,
        ToolDefinition(name="ctx_tool", description="d", parameters=OBJ, execute=body),
    )

    async def add_context(exec: ToolExec, nxt: Any) -> Any:
        outcome = await nxt()
        outcome.additional_contexts.append(user_message("extra context", {"kind": "repeat-tool-reminder"}))
        return outcome

    host.kernel.ctx.on(TOOL_POST_EXECUTE, add_context)
    events = await host.run(agent, "go")
    step2 = types(events).index("step/start", types(events).index("step/end"))
    assert types(events)[step2 : step2 + 2] == ["step/start", "user/message"]
    assert events[step2 + 1]["data"]["content"][0]["text"] == "extra context"


async def test_steering_during_a_step_adds_one_more_step(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"text": "first"}, {"text": "second"}])
    steered = False

    async def steer_once(options: dict[str, Any], nxt: Any) -> Any:
        nonlocal steered
        if not steered:
            steered = True
            agent.steer(user_message("also this"))
        return await nxt()

    host.kernel.ctx.on(LLM_STREAM, steer_once)
    events = await host.run(agent, "go")
    assert types(events).count("step/start") == 2
    assert types(events).count("turn/start") == 1


async def test_queued_followups_run_as_later_turns_with_status_running_between(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"text": "one"}, {"text": "two"}])
    statuses: list[str] = []
    host.kernel.ctx.on(AGENT_STATUS, lambda p: statuses.append(p["status"]))
    agent.followup(user_message("first"))
    agent.followup(user_message("second"))
    await agent.when_idle()
    assert statuses == ["running", "idle"]
    assert [e["data"]["turn"] for e in agent.session.events if e["type"] == "turn/end"] == [1, 2]


async def test_no_step_limit_fifty_steps(host_factory) -> None:  # type: ignore[no-untyped-def]
    script = [{"tool_calls": [call("noop")]} for _ in range(49)] + [{"text": "finally"}]
    host, agent = await host_factory(script)

    async def noop(args: Any, exec: ToolExec) -> str:
        return "ok"

    register(host, "noop", noop)
    events = await host.run(agent, "loop")
    assert types(events).count("step/start") == 50
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


async def test_pre_step_reject_and_empty_first_decision(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([])

    async def reject(payload: dict[str, Any], nxt: Any) -> Any:
        return {"kind": "reject"}

    dispose = host.kernel.ctx.on(PRE_STEP, reject)
    events = await host.run(agent, "blocked please")
    assert "step/start" not in types(events)
    assert events[-1]["data"]["reason"] == {"kind": "blocked"}
    dispose()

    async def empty(payload: dict[str, Any], nxt: Any) -> Any:
        return {"kind": "enter", "messages": []}

    host.kernel.ctx.on(PRE_STEP, empty)
    events = await host.run(agent, "nothing")
    assert "step/start" not in types(events)
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


async def test_rewritten_decision_is_what_gets_logged(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"text": "ok"}])

    async def rewrite(payload: dict[str, Any], nxt: Any) -> Any:
        decision = await nxt()
        decision["messages"] = [user_message("rewritten"), *decision["messages"][1:]]
        return decision

    host.kernel.ctx.on(PRE_STEP, rewrite)
    events = await host.run(agent, "original")
    prompts = [e["data"] for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"]
    assert [p["content"][0]["text"] for p in prompts] == ["rewritten"]


async def test_inbox_routing_duplicate_ids_and_cancel_outcome(host_factory) -> None:  # type: ignore[no-untyped-def]
    _host, agent = await host_factory([])
    message = user_message("pending")
    agent.inject(message)
    assert agent.status == "idle"
    assert agent.inbox.next_step[0]["id"] == message["id"]
    with pytest.raises(ValueError, match="already pending"):
        agent.inject(message)
    agent.cancel({"kind": "user"})
    splice = agent.session.events[-1]
    assert splice["data"] == {
        "target": "next-step",
        "start": 0,
        "removedCount": 1,
        "inserted": [],
        "outcome": "canceled",
    }
    assert not agent.inbox.has_pending


async def test_request_error_unrecovered_ends_turn_and_agent_accepts_new_work(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory(
        [{"throw": {"code": "AUTH", "message": "bad key", "status": 401}}, {"text": "works now"}]
    )
    events = await host.run(agent, "first")
    assert types(events)[-3:] == ["assistant/attempt", "step/end", "turn/end"]
    assert events[-1]["data"]["reason"] == {
        "kind": "error",
        "error": {"message": "bad key", "code": "AUTH", "status": 401},
    }
    assert agent.status == "idle"
    events = await host.run(agent, "second")
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


async def test_retryable_error_retries_in_the_same_step(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory(
        [{"error": {"code": "RATE_LIMIT", "message": "slow down", "status": 429}}, {"text": "ok"}]
    )
    events = await host.run(agent, "go")
    kinds = types(events)
    assert kinds.count("step/start") == 1
    tail = kinds[kinds.index("assistant/attempt") :]
    assert tail == ["assistant/attempt", "llm/retry", "llm/retry-started", "assistant/message", "step/end", "turn/end"]


async def test_cancel_mid_stream_keeps_interrupted_prefix_and_next_prompt_runs(host_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ready = tmp_path / "ready"
    host, agent = await host_factory([{"kind": "hang", "readyFile": str(ready)}, {"text": "after"}])
    agent.followup(user_message("hang please"))
    for _ in range(200):
        if ready.exists():
            break
        await asyncio.sleep(0.01)
    agent.cancel({"kind": "user"}, keep_inbox=True)
    await agent.when_idle()
    events = agent.session.events
    message = next(e for e in reversed(events) if e["type"] == "assistant/message")
    assert message["data"]["interrupted"] is True
    assert message["data"]["message"]["content"] == [{"type": "text", "text": "partial"}]
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    events = await host.run(agent, "again")
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


async def test_abort_during_tools_drains_started_and_answers_unstarted(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"tool_calls": [call("stopper"), call("never")]}])

    async def stopper(args: Any, exec: ToolExec) -> str:
        agent.cancel({"kind": "user"})
        return "stopped"

    async def never(args: Any, exec: ToolExec) -> str:
        raise AssertionError("must not run")

    register(host, "stopper", stopper)
    register(host, "never", never)
    events = await host.run(agent, "go")
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert results[0]["message"]["content"] == [{"type": "text", "text": "stopped"}]
    assert results[1]["message"]["content"] == [{"type": "text", "text": "Error: tool call aborted before dispatch"}]
    assert results[1]["error"] == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
    assert types(events)[-2:] == ["step/end", "turn/end"]
    assert events[-1]["data"]["reason"]["kind"] == "aborted"


async def test_wake_after_abort_is_latched_into_a_new_turn(host_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ready = tmp_path / "ready"
    _host, agent = await host_factory([{"kind": "hang", "readyFile": str(ready)}, {"text": "second turn"}])
    agent.followup(user_message("first"))
    for _ in range(200):
        if ready.exists():
            break
        await asyncio.sleep(0.01)
    agent.cancel({"kind": "user"})
    agent.steer(user_message("right after"))
    await agent.when_idle()
    ends = [e["data"]["reason"]["kind"] for e in agent.session.events if e["type"] == "turn/end"]
    assert ends == ["aborted", "completed"]


async def test_runtime_context_only_on_change_and_header_not_repeated(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"text": "a"}, {"text": "b"}])
    await host.run(agent, "one")
    events = await host.run(agent, "two")
    assert "request/header" not in types(events)
    assert "request/context" not in types(events)
    assert "system/message" not in types(events)
    contexts = [e for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "runtime-context"]
    assert contexts == []


async def test_runtime_context_snapshot_text(host_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"text": "a"}])
    events = await host.run(agent, "one")
    snap = next(e for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "runtime-context")
    text = snap["data"]["content"][0]["text"]
    assert text.startswith("Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n")
    sections = snap["data"]["source"]["sections"]
    assert sections[0] == {"name": "working-directory:current", "text": f'Current working directory: "{tmp_path}".'}


async def test_tool_bodies_run_with_the_agent_as_initiator(host_factory) -> None:  # type: ignore[no-untyped-def]
    host, agent = await host_factory([{"tool_calls": [call("who")]}, {"text": "ok"}])
    agents = host.kernel.ctx.require(AGENTS)
    seen: list[Any] = []

    async def who(args: Any, exec: ToolExec) -> str:
        seen.append(agents.require_initiator())
        seen.append(await agents.without_initiator(lambda: _current(agents)))
        return "me"

    register(host, "who", who)
    await host.run(agent, "go")
    assert seen == [agent, None]
    assert agents.current_initiator() is None


async def _current(agents: Any) -> Any:
    return agents.current_initiator()
