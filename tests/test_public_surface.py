"""The public modules export exactly the names pinned here, each name resolves, and every exception pydsh
defines has ``PydshError`` as its root. A change to a public surface is a change to this file."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import pydsh
from pydsh.kernel.errors import PydshError

PUBLIC: dict[str, list[str]] = {
    "pydsh": [
        "Agent",
        "AgentEvent",
        "AssistantMessage",
        "Host",
        "HostError",
        "Input",
        "Patch",
        "ReasoningDelta",
        "Run",
        "RunResult",
        "SessionEvent",
        "TextDelta",
        "ToolCall",
        "ToolResult",
        "TurnEnd",
        "__version__",
        "open_host",
    ],
    "pydsh.host": [
        "Agent",
        "AgentEvent",
        "AgentSpec",
        "AssistantMessage",
        "DEFAULT_PROFILE",
        "Host",
        "HostError",
        "Input",
        "Mode",
        "Patch",
        "ReasoningDelta",
        "Receipt",
        "Run",
        "RunResult",
        "SessionEvent",
        "TextDelta",
        "ToolCall",
        "ToolResult",
        "TurnEnd",
        "open_host",
    ],
    "pydsh.plugin": [
        "AGENTS",
        "AGENT_CREATED",
        "AGENT_DEFAULT_MODEL",
        "AGENT_DISPOSED",
        "AGENT_PRESETS",
        "AGENT_REQUEST",
        "AGENT_STATUS",
        "AGENT_TEAMS",
        "APPROVAL",
        "ASSISTANT_STREAM",
        "AbortError",
        "AbortSignal",
        "Agent",
        "AgentCreated",
        "AgentHandle",
        "AgentOptions",
        "AgentRef",
        "AgentRegistry",
        "AgentStatus",
        "AssistantStream",
        "Bail",
        "Content",
        "Context",
        "Disposer",
        "Emit",
        "Event",
        "HOST_INFO",
        "HostInfo",
        "KernelError",
        "LLM",
        "LLM_STREAM",
        "LlmAdapter",
        "LlmError",
        "Membership",
        "ModelInfo",
        "ModelSelection",
        "Next",
        "PRE_STEP",
        "PROMPT_ASSEMBLE",
        "Parallel",
        "PreStep",
        "PreStepDecision",
        "PromptAssemble",
        "PromptAssembly",
        "ProviderInfo",
        "PydshError",
        "ROUTES_CHANGED",
        "Route",
        "SESSIONS",
        "SESSION_EVENT",
        "SESSION_PROJECTIONS",
        "SESSION_QUERY",
        "SESSION_TITLE",
        "SUBAGENTS",
        "SYSTEM_PROMPT",
        "Serial",
        "ServiceKey",
        "SessionError",
        "SessionFormatUnsupportedError",
        "SessionLogError",
        "SessionPersistenceCorruptionError",
        "SessionPersistenceIOError",
        "SessionPersistenceNotFoundError",
        "Settled",
        "StepRequest",
        "StreamChunk",
        "TEAM_ROUTES",
        "TOOLS",
        "TOOLS_CHANGED",
        "TOOL_EXECUTE",
        "TOOL_POST_EXECUTE",
        "TOOL_PRE_EXECUTE",
        "TOOL_RESULT",
        "TeamRoutes",
        "ToolDefinition",
        "ToolError",
        "ToolExec",
        "ToolOutcome",
        "Tools",
        "USER_QUESTIONS",
        "UserMessage",
        "WORKING_DIRECTORY",
        "Waterfall",
        "dsh_home",
        "inherited_event_count",
        "install_model_selection",
        "preset_setup",
        "user_message",
    ],
    "pydsh.kernel": [
        "AbortController",
        "AbortError",
        "AbortSignal",
        "Context",
        "Kernel",
        "KernelError",
        "Scope",
        "create_scope",
    ],
    "pydsh.sdk.client": [
        "AsyncHarness",
        "AsyncJsonRpcClient",
        "AsyncSession",
        "Harness",
        "HarnessConfig",
        "HarnessError",
        "JsonRpcError",
        "Notification",
        "RunResult",
        "RunStream",
        "SdkProtocolError",
        "Session",
        "Subscription",
        "SyncRunStream",
        "TransportClosedError",
    ],
    "pydsh.testing": ["SCRIPTED_PROVIDERS", "ScriptedHost", "scripted_host", "scripted_patch"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_a_public_module_exports_the_pinned_names_and_each_resolves(module: str) -> None:
    loaded = importlib.import_module(module)
    assert sorted(loaded.__all__) == PUBLIC[module]
    for name in loaded.__all__:
        assert getattr(loaded, name) is not None, name


def test_what_type_checkers_see_of_the_plugin_surface_is_what_it_loads() -> None:
    """``pydsh.plugin`` names each export three times (the lazy table, ``__all__``, the type-only imports)."""
    import pydsh.plugin as surface

    tree = ast.parse(Path(surface.__file__).read_text())
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module is not None
                typed |= {alias.name: stmt.module for alias in stmt.names}
    lazy = {name: module for module, names in surface._SOURCES.items() for name in names}
    assert typed == lazy
    assert sorted(lazy) == sorted(surface.__all__)


def test_every_exception_pydsh_defines_is_a_pydsh_error() -> None:
    stray: list[str] = []
    names = sorted(m.name for m in pkgutil.walk_packages(pydsh.__path__, "pydsh."))
    for name in names:
        if name.rpartition(".")[2] == "__main__":
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            defined_here = isinstance(value, type) and value.__module__ == name
            if defined_here and issubclass(value, BaseException) and not issubclass(value, PydshError):
                stray.append(f"{name}.{value.__name__}")
    assert stray == []
