"""The ``tools`` service: scoped tool definitions, sorted schemas and one pipeline run per call (spec 05 §2).

Definitions are registered through the caller's context, so a tool is visible to that context's
scope and disappears when the registering plugin unloads. The loop sees a call as a
:class:`ToolExec` and gets back a :class:`ToolOutcome` from :meth:`ToolRegistry.invocation`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydsh.kernel.context import Context
from pydsh.kernel.events import define_event
from pydsh.kernel.fiber import Disposer
from pydsh.kernel.scope import ScopedLayers

if TYPE_CHECKING:
    from pydsh.agent.agent import Agent
    from pydsh.kernel.cancel import AbortSignal
    from pydsh.session.log import Session
    from pydsh.tools.pipeline import ToolInvocation

define_event("tools/pre-execute", "waterfall")
define_event("tools/execute", "waterfall")
define_event("tools/post-execute", "waterfall")
define_event("tools/result", "emit")
define_event("tools/change", "emit")

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
Content = list[dict[str, Any]]
Guard = Callable[["ToolExec"], "str | Awaitable[str | None] | None"]


@dataclass
class ToolExec:
    """One call as the loop sees it; also the payload of the ``tools/*`` waterfalls."""

    call_id: str
    name: str
    raw_arguments: str
    arguments: Any
    agent: Agent | None
    session: Session | None
    turn: int | None
    step: int | None
    signal: AbortSignal
    scope: object | None
    parent_call_id: str | None = None
    root_call_id: str | None = None


@dataclass
class ToolOutcome:
    """A call's settled result: model-visible content plus what the log records beside it."""

    content: Content
    is_error: bool
    error: dict[str, Any] | None
    meta: Any = None
    additional_contexts: list[dict[str, Any]] = field(default_factory=list)
    concludes_turn: bool = False


class ToolError(Exception):
    """A tool-level failure; ``code`` (with ``error_name``) is logged as ``tool/result.error``."""

    error_name = "ToolError"

    def __init__(self, message: str, code: str | None = None, *, name: str | None = None, reason: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        if name is not None:
            self.error_name = name

    def error(self) -> dict[str, Any] | None:
        """The logged ``{name, code[, reason]}`` or ``None`` for a plain failure."""
        if self.code is None:
            return None
        out: dict[str, Any] = {"name": self.error_name, "code": self.code}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True, eq=False)
class ToolDefinition:
    """A model-facing tool: its schema, body and optional hooks (spec 05 §2)."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[[Any, ToolExec], Any]
    render: Callable[[Any, Any], Content] | None = None
    is_concurrency_safe: Callable[[Any], bool] | None = None
    timeout_ms: int | None = None
    finalize_content: Callable[[Content], Content] | None = None
    meta: Callable[[Any, Any], Any] | None = None

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ValueError(f'tool name "{self.name}" must match [A-Za-z0-9_-]{{1,64}}')
        if self.parameters.get("type") != "object":
            raise ValueError(f'tool "{self.name}": parameters must be a JSON Schema with an object root')

    def schema(self) -> dict[str, Any]:
        """What reaches the model: name, description and parameters, in that key order."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


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
        self.ctx.emit("tools/change")

        def unregister() -> None:
            remove()
            self.ctx.emit("tools/change")

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

    def execution_mode(self, exec: ToolExec) -> Literal["parallel", "exclusive"]:
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
        from pydsh.tools.pipeline import ToolInvocation

        return ToolInvocation(self, exec)


name = "tools"
optional = ("system_prompt",)


def apply(ctx: Context, config: None) -> None:
    """Provide ``tools`` and expose its schemas to prompt assembly."""
    registry = ToolRegistry(ctx)
    ctx.provide("tools", registry)
    system_prompt = ctx.get("system_prompt")
    if system_prompt is not None:
        system_prompt.tools(ctx, "tools", registry.schemas)
