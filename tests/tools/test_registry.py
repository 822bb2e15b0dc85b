"""The registry and the call pipeline, driven with dummy tools through a real kernel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import (
    TOOL_EXECUTE,
    TOOL_POST_EXECUTE,
    TOOL_PRE_EXECUTE,
    TOOL_RESULT,
    TOOLS,
    TOOLS_CHANGED,
    ToolDefinition,
    ToolError,
    ToolExec,
    ToolOutcome,
)
from pydsh.kernel import Context
from tests.tools.harness import Harness, harness, text_of

P = "tests.tools.test_registry"
SEEN: list[Any] = []
OBJ = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}


async def echo_body(args: dict[str, Any], exec: ToolExec) -> str:
    SEEN.append(args)
    if args["x"] == "boom":
        raise ToolError("it broke", "BOOM", name="DummyError")
    if args["x"] == "plain":
        raise ValueError("plain failure")
    if args["x"] == "sleep":
        await asyncio.sleep(30)
    return f"echo {args['x']}"


def dummy_plugin(ctx: Context, config: None) -> None:
    tools = ctx.require(TOOLS)
    tools.register(
        ctx,
        ToolDefinition(
            "echo",
            "Echo x.",
            OBJ,
            echo_body,
            is_concurrency_safe=lambda a: a.get("x") == "safe" or (1 if a.get("x") == "truthy" else False),
            meta=lambda a, v: {"len": len(v)},
        ),
    )
    tools.register(ctx, ToolDefinition("zeta", "Z.", {"type": "object", "properties": {}}, lambda a, e: "z"))
    tools.register(ctx, ToolDefinition("Alpha", "A.", {"type": "object", "properties": {}}, lambda a, e: "A"))
    tools.register(ctx, ToolDefinition("_under", "U.", {"type": "object", "properties": {}}, lambda a, e: "U"))
    tools.register(
        ctx,
        ToolDefinition(
            "slow", "Slow.", {"type": "object", "properties": {}}, lambda a, e: asyncio.sleep(5, "late"), timeout_ms=20
        ),
    )
    tools.register(
        ctx,
        ToolDefinition(
            "shout",
            "Shout.",
            {"type": "object", "properties": {}},
            lambda a, e: "quiet",
            finalize_content=lambda content: [{"type": "text", "text": content[0]["text"].upper()}],
        ),
    )


dummy_plugin.inject = (TOOLS,)  # type: ignore[attr-defined]


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    SEEN.clear()
    world = await harness(tmp_path, [("tools", None), (f"{P}:dummy_plugin", None)])
    yield world
    await world.close()


async def test_schemas_are_sorted_by_code_point_and_exact(h: Harness) -> None:
    names = [s["name"] for s in h.tools.schemas(None)]
    assert names == ["Alpha", "_under", "echo", "shout", "slow", "zeta"]
    assert h.tools.schemas(None)[2] == {"name": "echo", "description": "Echo x.", "parameters": OBJ}
    assert list(h.tools.schemas(None)[2]) == ["name", "description", "parameters"]


async def test_system_prompt_sees_the_tools(h: Harness) -> None:
    assembly = await h.kernel.ctx.require(SYSTEM_PROMPT).assemble(agent=h.agent)
    assert [t["name"] for t in assembly.tools] == ["Alpha", "_under", "echo", "shout", "slow", "zeta"]


async def test_duplicate_in_one_layer_raises_and_scoped_layer_shadows(h: Harness) -> None:
    definition = ToolDefinition("echo", "Local.", {"type": "object", "properties": {}}, lambda a, e: "local")
    with pytest.raises(ValueError, match='tool "echo" is already registered'):
        h.tools.register(h.kernel.ctx, definition)
    changes: list[int] = []
    h.kernel.ctx.on(TOOLS_CHANGED, lambda: changes.append(1))
    dispose = h.tools.register(h.agent.ctx, definition)
    assert changes == [1]
    assert await h.text("echo") == "local"
    assert [s["description"] for s in h.tools.schemas(h.agent) if s["name"] == "echo"] == ["Local."]
    assert [s["description"] for s in h.tools.schemas(None) if s["name"] == "echo"] == ["Echo x."]
    dispose()
    assert changes == [1, 1]
    assert await h.text("echo", {"x": "again"}) == "echo again"


async def test_unload_unregisters(h: Harness) -> None:
    fiber = next(f for f in h.kernel.fiber.children if f.row_id.endswith("dummy_plugin"))
    await h.kernel.loader.dispose(fiber)
    assert h.tools.schemas(None) == []


def test_invalid_tool_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="must match"):
        ToolDefinition("bad name", "", {"type": "object"}, lambda a, e: "")
    with pytest.raises(ValueError, match="object root"):
        ToolDefinition("ok", "", {"type": "array"}, lambda a, e: "")


@pytest.mark.parametrize(
    ("args", "mode"),
    [({"x": "safe"}, "parallel"), ({"x": "truthy"}, "exclusive"), ({"x": "other"}, "exclusive"), ("raw", "exclusive")],
)
async def test_execution_mode_needs_exactly_true(h: Harness, args: Any, mode: str) -> None:
    assert h.tools.execution_mode(h.exec("echo", args)) == mode


async def test_execution_mode_of_unknown_and_undeclared_tools(h: Harness) -> None:
    assert h.tools.execution_mode(h.exec("nope", {})) == "exclusive"
    assert h.tools.execution_mode(h.exec("zeta", {})) == "exclusive"


async def test_success_renders_text_and_meta(h: Harness) -> None:
    outcome = await h.call("echo", {"x": "hi", "ignored": 1})
    assert outcome == ToolOutcome([{"type": "text", "text": "echo hi"}], False, None, {"len": 7})


async def test_unknown_tool(h: Harness) -> None:
    outcome = await h.call("nope_tool", {})
    assert text_of(outcome) == 'Error: unknown tool "nope_tool"'
    assert outcome.is_error
    assert outcome.error == {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", 'invalid arguments: missing required property "x"'),
        ("{}", 'invalid arguments: missing required property "x"'),
        ('{"x": 3}', 'invalid arguments: "x" must be a string'),
        ("not json", 'invalid arguments: "arguments" must be an object'),
        ("[1]", 'invalid arguments: "arguments" must be an object'),
    ],
)
async def test_argument_errors(h: Harness, raw: str, message: str) -> None:
    outcome = await h.call("echo", raw=raw)
    assert text_of(outcome) == f"Error: {message}"
    assert outcome.error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    assert SEEN == []


async def test_tool_errors_with_and_without_code(h: Harness) -> None:
    coded = await h.call("echo", {"x": "boom"})
    assert (text_of(coded), coded.error) == ("Error: it broke", {"name": "DummyError", "code": "BOOM"})
    plain = await h.call("echo", {"x": "plain"})
    assert (text_of(plain), plain.is_error, plain.error) == ("Error: plain failure", True, None)


async def test_timeout(h: Harness) -> None:
    outcome = await h.call("slow", {})
    assert text_of(outcome) == "Error: tool call timed out after 20ms"
    assert outcome.error == {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}


async def test_turn_abort_during_the_body(h: Harness) -> None:
    inv = h.tools.invocation(h.exec("echo", {"x": "sleep"}))
    await inv.prepare()
    task = asyncio.create_task(inv.execute())
    await asyncio.sleep(0.01)
    h.controller.abort({"kind": "user"})
    await task
    outcome = await inv.commit()
    assert (text_of(outcome), outcome.error) == ("Error: tool call aborted", {"name": "AbortError", "code": "ABORTED"})


async def test_abort_before_dispatch_skips_the_body(h: Harness) -> None:
    async def flush_then_cancel(exec: ToolExec, next: Any) -> Any:
        h.controller.abort({"kind": "user"})
        return await next()

    h.kernel.ctx.on(TOOL_EXECUTE, flush_then_cancel)
    outcome = await h.call("echo", {"x": "never"})
    assert text_of(outcome) == "Error: tool call aborted before dispatch"
    assert outcome.error == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
    assert SEEN == []


async def test_execute_listener_failure_propagates(h: Harness) -> None:
    async def failing_checkpoint(exec: ToolExec, next: Any) -> Any:
        raise OSError("disk full")

    h.kernel.ctx.on(TOOL_EXECUTE, failing_checkpoint)
    inv = h.tools.invocation(h.exec("echo", {"x": "a"}))
    await inv.prepare()
    with pytest.raises(OSError, match="disk full"):
        await inv.execute()
    assert SEEN == []


async def test_policies_cannot_rewrite_arguments(h: Harness) -> None:
    async def rewrite(exec: ToolExec, next: Any) -> Any:
        exec.arguments = {"x": "rewritten"}
        return await next()

    h.kernel.ctx.on(TOOL_PRE_EXECUTE, rewrite)
    assert await h.text("echo", {"x": "original"}) == "echo original"


async def test_pre_execute_deny_and_guards(h: Harness) -> None:
    async def deny(exec: ToolExec, next: Any) -> Any:
        if exec.arguments.get("x") == "deny":
            return {"kind": "deny", "reason": "not this one"}
        return await next()

    h.kernel.ctx.on(TOOL_PRE_EXECUTE, deny)
    assert text_of(await h.call("echo", {"x": "deny"})) == "Error: not this one"
    h.tools.guard(h.agent.ctx, "no-zeta", lambda exec: "zeta is off" if exec.name == "zeta" else None)
    assert text_of(await h.call("zeta", {})) == "Error: zeta is off"
    assert text_of(await h.call("echo", {"x": "fine"})) == "echo fine"
    assert SEEN == [{"x": "fine"}]


async def test_ask_without_agent_or_approval_service(h: Harness) -> None:
    async def ask(exec: ToolExec, next: Any) -> Any:
        return {"kind": "ask", "reason": "hook"}

    h.kernel.ctx.on(TOOL_PRE_EXECUTE, ask)
    unavailable = 'Error: tool "zeta" requires approval, but no approval channel is available'
    assert text_of(await h.call("zeta", {})) == unavailable
    exec = h.exec("zeta", {})
    exec.agent = None
    outcome = await h.run(exec)
    assert text_of(outcome) == 'Error: tool "zeta" requires approval, but the call has no agent to route it through'


async def test_post_execute_block_and_result_emit(h: Harness) -> None:
    seen: list[tuple[str, bool]] = []

    async def block(exec: ToolExec, next: Any) -> Any:
        outcome = await next()
        if exec.name == "zeta":
            return {"kind": "block", "feedback": "blocked by hook"}
        return outcome

    h.kernel.ctx.on(TOOL_POST_EXECUTE, block)
    h.kernel.ctx.on(TOOL_RESULT, lambda exec, outcome: seen.append((exec.name, outcome.is_error)))
    outcome = await h.call("zeta", {})
    assert outcome.content == [{"type": "text", "text": "blocked by hook"}]
    assert (outcome.is_error, outcome.error) == (True, None)
    assert seen == [("zeta", True)]


async def test_finalize_content(h: Harness) -> None:
    assert await h.text("shout", {}) == "QUIET"


async def test_parallel_invocations_run_concurrently(h: Harness) -> None:
    invs = [h.tools.invocation(h.exec("echo", {"x": f"p{i}"})) for i in range(3)]
    for inv in invs:
        await inv.prepare()
    await asyncio.gather(*(inv.execute() for inv in invs))
    texts = [text_of(await inv.commit()) for inv in invs]
    assert texts == ["echo p0", "echo p1", "echo p2"]
