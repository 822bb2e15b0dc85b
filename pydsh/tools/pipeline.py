"""One tool call through the pipeline (spec 05 §3).

``prepare`` (unknown-tool check, ``tools/pre-execute``, approval asks, deny-only guards) →
``execute`` (``tools/execute`` around argument validation and the body, with the declared
deadline) → ``commit`` (``tools/post-execute``, ``finalize_content``, ``tools/result``). Tool-level
failures become error outcomes; only infrastructure failures raised by listeners propagate.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydsh.contract.tools import (
    ABORTED,
    INVALID_ARGS,
    TOOL_EXECUTE,
    TOOL_POST_EXECUTE,
    TOOL_PRE_EXECUTE,
    TOOL_RESULT,
    TOOL_TIMEOUT,
    Content,
    PreExecuteDecision,
    ToolError,
    ToolExec,
    ToolOutcome,
    aborted_before_dispatch,
    failure,
    failure_of,
    text,
    unknown_tool,
)
from pydsh.kernel.cancel import AbortController, AbortError
from pydsh.policy.keys import APPROVAL
from pydsh.tools.schema import validate

if TYPE_CHECKING:
    from pydsh.contract.tools import ToolDefinition
    from pydsh.tools.registry import ToolRegistry

log = logging.getLogger("pydsh.tools")


class _Deadline:
    """Abort reason of a tool's own deadline (distinguishes it from a turn abort)."""


DEADLINE = _Deadline()


def _allow() -> PreExecuteDecision:
    return {"kind": "allow"}


def _render(value: Any) -> Content:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return value
    raise TypeError(f"tool returned {type(value).__name__}; expected text or content blocks")


ASK_TEXTS = {
    "rejected": 'the user rejected tool "{name}"',
    "cancelled": 'approval for tool "{name}" was cancelled',
    "unavailable": 'tool "{name}" requires approval, but no approval channel is available',
}


class ToolInvocation:
    """The pipeline state of one call; ``outcome`` is set once something decided it."""

    def __init__(self, registry: ToolRegistry, exec: ToolExec) -> None:
        self.registry = registry
        self.exec = exec
        self.definition: ToolDefinition | None = registry.lookup(exec.scope, exec.name)
        self.arguments = exec.arguments
        self.outcome: ToolOutcome | None = None

    @property
    def settled(self) -> bool:
        """True when ``prepare`` already decided the result (nothing to dispatch)."""
        return self.outcome is not None

    async def prepare(self) -> None:
        """Unknown-tool check, the ``tools/pre-execute`` decision (with approval) and guards."""
        exec = self.exec
        if self.definition is None:
            self.outcome = unknown_tool(exec.name)
            return
        ctx = self.registry.ctx
        decision = await ctx.waterfall(TOOL_PRE_EXECUTE, exec, _allow, scope=exec.scope)
        kind = decision.get("kind") if isinstance(decision, dict) else None
        if kind == "deny":
            self.outcome = failure(str(decision.get("reason") or f'tool "{exec.name}" was denied'))
            return
        if kind == "ask":
            denial = await self._ask(decision)
            if denial is not None:
                self.outcome = failure(denial)
                return
        for guard in self.registry.guards(exec.scope):
            reason = guard(exec)
            if inspect.isawaitable(reason):
                reason = await reason
            if reason:
                self.outcome = failure(str(reason))
                return

    async def _ask(self, decision: PreExecuteDecision) -> str | None:
        exec = self.exec
        if exec.agent is None:
            return f'tool "{exec.name}" requires approval, but the call has no agent to route it through'
        approval = self.registry.ctx.get(APPROVAL)
        outcome = "unavailable"
        if approval is not None:
            outcome = await approval.request(
                exec.agent,
                exec.name,
                call_id=exec.call_id,
                reason=decision.get("reason"),
                display_reason=decision.get("displayReason"),
                signal=exec.signal,
            )
        if outcome == "allowed-once":
            return None
        return ASK_TEXTS.get(outcome, ASK_TEXTS["unavailable"]).format(name=exec.name)

    async def execute(self) -> None:
        """Run ``tools/execute`` around validation and the body (no-op once settled)."""
        if self.outcome is not None:
            return
        exec = self.exec
        self.outcome = await self.registry.ctx.waterfall(TOOL_EXECUTE, exec, self._run, scope=exec.scope)

    async def _run(self) -> ToolOutcome:
        exec = self.exec
        definition = self.definition
        assert definition is not None
        if exec.signal.aborted:
            return aborted_before_dispatch()
        args = self.arguments
        problems = validate(definition.parameters, args)
        if problems:
            return failure("invalid arguments: " + "; ".join(problems), INVALID_ARGS)
        controller = AbortController()
        detach = exec.signal.add_callback(controller.abort)
        timer = None
        if definition.timeout_ms:
            timer = asyncio.get_running_loop().call_later(definition.timeout_ms / 1000, controller.abort, DEADLINE)
        try:
            async with controller.signal.scope():
                value = definition.execute(args, replace(exec, arguments=args, signal=controller.signal))
                if inspect.isawaitable(value):
                    value = await value
            if isinstance(value, ToolOutcome):
                return value
            content = definition.render(args, value) if definition.render else _render(value)
            meta = definition.meta(args, value) if definition.meta else None
            return ToolOutcome(content, False, None, meta)
        except Exception as exc:
            if controller.signal.aborted and (isinstance(exc, AbortError) or not isinstance(exc, ToolError)):
                return self._aborted(controller.signal.reason, definition.timeout_ms)
            if not isinstance(exc, (ToolError, ValueError, OSError)):
                log.warning("tool %s raised", exec.name, exc_info=True)
            return failure_of(exc)
        finally:
            detach()
            if timer is not None:
                timer.cancel()

    @staticmethod
    def _aborted(reason: object, timeout_ms: int | None) -> ToolOutcome:
        if reason is DEADLINE:
            return failure(f"tool call timed out after {timeout_ms}ms", TOOL_TIMEOUT)
        return failure("tool call aborted", ABORTED)

    async def commit(self) -> ToolOutcome:
        """``tools/post-execute``, ``finalize_content`` and the ``tools/result`` emit."""
        if self.outcome is None:
            await self.execute()
        outcome = self.outcome
        assert outcome is not None
        exec = self.exec
        ctx = self.registry.ctx
        decided: Any = await ctx.waterfall(TOOL_POST_EXECUTE, exec, lambda: outcome, scope=exec.scope)
        if isinstance(decided, dict) and decided.get("kind") == "block":
            feedback = decided.get("feedback")
            blocks = text(feedback) if isinstance(feedback, str) else list(feedback or [])
            decided = ToolOutcome(blocks, True, None, None, list(outcome.additional_contexts))
        result: ToolOutcome = decided
        definition = self.definition
        if definition is not None and definition.finalize_content is not None and not result.is_error:
            result = replace(result, content=definition.finalize_content(result.content))
        self.outcome = result
        ctx.emit(TOOL_RESULT, exec, result, scope=exec.scope)
        return result
