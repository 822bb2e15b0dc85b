"""The ``tools`` service: scoped tool definitions, sorted schemas and one pipeline run per call (spec 05 §2).

Definitions are registered through the caller's context, so a tool is visible to that context's
scope and disappears when the registering plugin unloads. The loop sees a call as a
:class:`ToolExec` and gets back a :class:`ToolOutcome` from :meth:`ToolRegistry.invocation`.
"""

from __future__ import annotations

from typing import Any

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import TOOLS, TOOLS_CHANGED, ExecutionMode, Guard, ToolDefinition, ToolExec
from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer
from pydsh.kernel.scope import ScopedLayers
from pydsh.tools.pipeline import ToolInvocation


class ToolRegistry:
    """Scoped tool definitions, deny-only guards and the call pipeline."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        tree = ctx.runtime.scopes
        self._tools: ScopedLayers[ToolDefinition] = ScopedLayers(tree, "tool")
        self._guards: ScopedLayers[Guard] = ScopedLayers(tree, "tool guard")

    def register(self, ctx: Context, definition: ToolDefinition) -> Disposer:
        """Add ``definition`` to ``ctx``'s scope layer; a duplicate name in one layer raises."""
        remove = self._tools.add(ctx.scope, definition.name, definition)
        self.ctx.emit(TOOLS_CHANGED)

        def unregister() -> None:
            remove()
            self.ctx.emit(TOOLS_CHANGED)

        return ctx.register(unregister)

    def guard(self, ctx: Context, name: str, check: Guard) -> Disposer:
        """Add a deny-only guard: ``check(exec)`` returns a denial reason or ``None``."""
        return ctx.register(self._guards.add(ctx.scope, name, check))

    def lookup(self, scope: object | None, name: str) -> ToolDefinition | None:
        return self._tools.lookup(scope, name)

    def definitions(self, scope: object | None) -> list[ToolDefinition]:
        """Visible definitions, nearest layer shadowing by name, sorted by name (code points)."""
        merged = self._tools.merged(scope)
        return [merged[name] for name in sorted(merged)]

    def schemas(self, scope: object | None) -> list[dict[str, Any]]:
        """``[{name, description, parameters}]`` visible from ``scope``, sorted by name."""
        return [d.schema() for d in self.definitions(scope)]

    def guards(self, scope: object | None) -> list[Guard]:
        merged = self._guards.merged(scope)
        return [merged[name] for name in sorted(merged)]

    def execution_mode(self, exec: ToolExec) -> ExecutionMode:
        """``parallel`` only when the tool's ``is_concurrency_safe(args)`` returns exactly ``True``."""
        definition = self.lookup(exec.scope, exec.name)
        if definition is None or definition.is_concurrency_safe is None:
            return "exclusive"
        try:
            safe = definition.is_concurrency_safe(exec.arguments)
        except Exception:
            return "exclusive"
        return "parallel" if safe is True else "exclusive"

    def invocation(self, exec: ToolExec) -> ToolInvocation:
        """One pipeline run for ``exec``: ``prepare``, ``execute``, ``commit``."""
        return ToolInvocation(self, exec)


name = "tools"
optional = (SYSTEM_PROMPT,)


def apply(ctx: Context, config: None) -> None:
    """Provide ``tools`` and expose its schemas to prompt assembly."""
    registry = ToolRegistry(ctx)
    ctx.provide(TOOLS, registry)
    system_prompt = ctx.get(SYSTEM_PROMPT)
    if system_prompt is not None:
        system_prompt.tools(ctx, "tools", registry.schemas)
