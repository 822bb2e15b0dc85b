"""The ``system_prompt`` service: sections, runtime contexts, variables, tool providers (spec 03 §10).

Registrations are scoped by the registering context and merged by name along the agent's scope
chain. ``assemble`` gathers what an agent sees; ``render`` produces the system prompt text and
``render_contexts`` the runtime-context sections.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydsh.agent.hooks import PROMPT_ASSEMBLE, PromptAssemble
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.kernel.cancel import AbortSignal
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.kernel.errors import PydshError
from pydsh.kernel.fiber import Disposer
from pydsh.kernel.scope import ScopedLayers

TextSource = str | Callable[[Any], str | None]
"""Fixed text, or ``fn(agent) -> text`` rendered at each step (``None``/``""`` drops it)."""

SECTION_ORDER = {
    "PLAN_POLICY": 500,
    "TEAM_POLICY": 600,
    "PTC_ONLY": 800,
    "FILE_REFERENCE": 900,
    "TOOL_BASH": 1000,
    "TOOL_PWSH": 1010,
    "TOOL_READ": 1100,
    "TOOL_WRITE": 1200,
    "TOOL_EDIT": 1300,
    "TOOL_GLOB": 1400,
    "TOOL_GREP": 1500,
    "TOOL_JOBS": 1600,
    "TOOL_PTY": 1700,
    "TOOL_WEB_SEARCH": 2000,
    "TOOL_WEB_FETCH": 2100,
    "TOOL_LSP": 2200,
    "TOOL_SESSION_QUERY": 2300,
    "TOOL_GOAL": 2400,
    "TOOL_WORKFLOW": 2600,
    "TOOL_RALPH": 2700,
    "TOOL_SUBAGENT": 2800,
    "TOOL_MESSAGING": 2850,
    "TOOL_COMPUTER_USE": 3000,
    "MCP_SERVERS": 3100,
    "TOOLS_SDK": 5000,
    "DELIVERABLE_FILE_REFERENCES": 9000,
    "STRUCTURED_OUTPUT": 9900,
    "HARNESS_SOURCE": 10000,
    "WEB_SURFACE": 10100,
}
CONTEXT_ORDER = {
    "WORKING_DIRECTORY": 100,
    "SANDBOX_POLICY": 110,
    "APPROVAL_POLICY": 115,
    "SUBAGENT_IDENTITY": 118,
    "SUBAGENT_DELEGATION": 120,
    "TEAM_IDENTITY": 125,
    "HARNESS_SOURCE": 200,
    "WEB_SURFACE": 210,
}
IDENTITY = "You are an AI agent powered by DeepSeek Harness."
UNLISTED = "<unlisted-tools>"
_VARIABLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_REF = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


class PromptError(PydshError, ValueError):
    """A prompt cannot be rendered (unknown variable, two complete sections, …)."""


@dataclass(frozen=True)
class Section:
    name: str
    order: float
    text: TextSource
    complete: bool = False
    interpolate: bool = True


@dataclass(frozen=True)
class RuntimeContext:
    name: str
    order: float
    text: TextSource
    required: bool = False
    interpolate: bool = True


ToolProvider = Callable[[Any], list[dict[str, Any]]]


@dataclass
class PromptAssembly:
    """What one agent's prompt is made of at one step."""

    agent: Any
    sections: list[Section] = field(default_factory=list)
    contexts: list[RuntimeContext] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    variables: dict[str, Callable[[Any], str | None]] = field(default_factory=dict)
    include_runtime_context: bool = True


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    includeHarnessIdentity: bool = True
    personaPrefix: str | None = None
    personaSuffix: str | None = None
    includeRuntimeContext: bool = True
    toolOrder: list[str] | None = None


def _check_order(order: float) -> None:
    if not math.isfinite(order):
        raise ValueError(f"prompt order must be finite, got {order!r}")


class SystemPrompt:
    """Scoped registries of sections, contexts, variables and tool providers."""

    def __init__(self, ctx: Context, config: Config) -> None:
        tree = ctx.runtime.scopes
        self.ctx = ctx
        self.config = config
        self._sections: ScopedLayers[Section] = ScopedLayers(tree, "prompt section")
        self._contexts: ScopedLayers[RuntimeContext] = ScopedLayers(tree, "runtime context")
        self._variables: ScopedLayers[Callable[[Any], str | None]] = ScopedLayers(tree, "prompt variable")
        self._tools: ScopedLayers[ToolProvider] = ScopedLayers(tree, "tool provider")
        self._suppressed: set[object | None] = set()

    # -- registration (effects of the caller's fiber, scoped by its context) ---------------------

    def section(
        self,
        ctx: Context,
        name: str,
        order: float,
        text: TextSource,
        *,
        complete: bool = False,
        interpolate: bool = True,
    ) -> Disposer:
        _check_order(order)
        return ctx.register(self._sections.add(ctx.scope, name, Section(name, order, text, complete, interpolate)))

    def context(
        self,
        ctx: Context,
        name: str,
        order: float,
        text: TextSource,
        *,
        required: bool = False,
        interpolate: bool = True,
    ) -> Disposer:
        _check_order(order)
        entry = RuntimeContext(name, order, text, required, interpolate)
        return ctx.register(self._contexts.add(ctx.scope, name, entry))

    def variable(self, ctx: Context, name: str, fn: Callable[[Any], str | None]) -> Disposer:
        if not _VARIABLE_NAME.match(name):
            raise ValueError(f'prompt variable name "{name}" must match ^[a-z][a-z0-9_]*$')
        return ctx.register(self._variables.add(ctx.scope, name, fn))

    def tools(self, ctx: Context, name: str, provider: ToolProvider) -> Disposer:
        return ctx.register(self._tools.add(ctx.scope, name, provider))

    def suppress_runtime_context(self, ctx: Context) -> Disposer:
        scope = ctx.scope
        self._suppressed.add(scope)
        return ctx.register(lambda: self._suppressed.discard(scope))

    # -- assembly ---------------------------------------------------------------------------

    async def assemble(
        self, agent: Any = None, scope: object | None = None, signal: AbortSignal | None = None
    ) -> PromptAssembly:
        """Merge the layers visible from ``scope`` (default: the agent) and run the assemble waterfall."""
        key = scope if scope is not None else agent
        assembly = PromptAssembly(agent=agent)
        assembly.sections = sorted(self._sections.merged(key).values(), key=lambda s: (s.order, s.name))
        assembly.contexts = sorted(self._contexts.merged(key).values(), key=lambda c: (c.order, c.name))
        assembly.variables = dict(self._variables.merged(key))
        schemas: dict[str, dict[str, Any]] = {}
        for provider in self._tools.merged(key).values():
            for schema in provider(agent):
                schemas[schema["name"]] = schema
        assembly.tools = self._order_tools(schemas)
        assembly.include_runtime_context = self.config.includeRuntimeContext and not any(
            k in self._suppressed for k in self.ctx.runtime.scopes.chain(key)
        )

        async def default() -> PromptAssembly:
            return assembly

        result: PromptAssembly = await self.ctx.waterfall(
            PROMPT_ASSEMBLE, PromptAssemble(assembly=assembly, agent=agent, signal=signal), default, scope=key
        )
        completes = [s for s in result.sections if s.complete]
        if len(completes) > 1:
            raise PromptError("more than one complete prompt section: " + ", ".join(s.name for s in completes))
        if completes:
            result.sections = completes
        return result

    def _order_tools(self, schemas: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        names = sorted(schemas)
        order = self.config.toolOrder
        if not order:
            return [schemas[n] for n in names]
        listed = [n for n in order if n != UNLISTED and n in schemas]
        rest = [n for n in names if n not in listed]
        at = order.index(UNLISTED) if UNLISTED in order else len(order)
        before = [n for n in order[:at] if n in listed]
        after = [n for n in order[at:] if n in listed]
        return [schemas[n] for n in (*before, *rest, *after)]

    # -- rendering --------------------------------------------------------------------------

    def render(self, assembly: PromptAssembly) -> str:
        """The system prompt text: non-empty sections joined by a blank line."""
        parts = []
        for section in assembly.sections:
            text = _text(section.text, assembly.agent)
            if text and section.interpolate:
                text = render_template(text, assembly)
            if text:
                parts.append(text)
        return "\n\n".join(parts)

    def render_contexts(self, assembly: PromptAssembly) -> list[dict[str, str]]:
        """Runtime-context sections ``{name, text}`` in order; optional ones only when not suppressed."""
        out = []
        for entry in assembly.contexts:
            if not entry.required and not assembly.include_runtime_context:
                continue
            text = _text(entry.text, assembly.agent)
            if text and entry.interpolate:
                text = render_template(text, assembly)
            if text:
                out.append({"name": entry.name, "text": text})
        return out


def _text(source: TextSource, agent: Any) -> str | None:
    return source if isinstance(source, str) else source(agent)


def render_template(text: str, assembly: PromptAssembly) -> str:
    """Strict ``{{name}}`` interpolation; substituted values are not re-scanned (spec 03 §10.1)."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        fn = assembly.variables.get(name)
        if not _VARIABLE_NAME.match(name):
            raise PromptError(f"malformed prompt variable reference {m.group(0)!r}")
        if fn is None:
            raise PromptError(f'unknown prompt variable "{name}"')
        value = fn(assembly.agent)
        if value is None:
            raise PromptError(f'prompt variable "{name}" has no value')
        return value

    return _REF.sub(sub, text)


name = "system-prompt"


def apply(ctx: Context, config: Config) -> None:
    """Provide ``system_prompt`` with the harness identity and deployment persona sections."""
    service = SystemPrompt(ctx, config)
    ctx.provide(SYSTEM_PROMPT, service)
    if config.includeHarnessIdentity:
        service.section(ctx, "harness:identity", -1000, IDENTITY)
    if config.personaPrefix:
        service.section(ctx, "deployment:persona-prefix", 0, config.personaPrefix)
    if config.personaSuffix:
        service.section(ctx, "deployment:persona-suffix", 10200, config.personaSuffix)
