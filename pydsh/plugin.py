"""The names a plugin may import: the kernel's seams, the service keys and events of the shipped packages,
and the contracts of agents, tools and models.

Everything else under ``pydsh`` is internal and may change between releases. A name here keeps its
meaning; ``tests/test_public_surface.py`` pins the list. Each name loads with the module that
defines it on first use, so importing this module costs nothing at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh import lazy_names

_SOURCES: dict[str, tuple[str, ...]] = {
    # the kernel: what a plugin receives, typed keys and events, effects, cancellation, errors, config
    "pydsh.kernel.context": ("Context",),
    "pydsh.kernel.keys": ("HOST_INFO", "HostInfo", "ServiceKey"),
    "pydsh.kernel.events": ("Bail", "Emit", "Next", "Parallel", "Serial", "Waterfall"),
    "pydsh.kernel.fiber": ("Disposer",),
    "pydsh.kernel.cancel": ("AbortError", "AbortSignal"),
    "pydsh.kernel.errors": ("KernelError", "PydshError"),
    "pydsh.kernel.compose": ("dsh_home",),
    # agents: the contract, the services and events, model selection, presets
    "pydsh.contract.agent": ("Agent", "AgentOptions", "UserMessage", "user_message"),
    "pydsh.agent.keys": ("AGENTS", "AGENT_DEFAULT_MODEL", "AGENT_PRESETS", "SYSTEM_PROMPT", "WORKING_DIRECTORY"),
    "pydsh.agent.hooks": (
        "AGENT_CREATED",
        "AGENT_DISPOSED",
        "AGENT_REQUEST",
        "AGENT_STATUS",
        "ASSISTANT_STREAM",
        "PRE_STEP",
        "PROMPT_ASSEMBLE",
        "AgentCreated",
        "AgentRef",
        "AgentStatus",
        "AssistantStream",
        "PreStep",
        "PreStepDecision",
        "PromptAssemble",
        "StepRequest",
    ),
    "pydsh.agent.registry": ("AgentHandle", "AgentRegistry"),
    "pydsh.agent.presets": ("preset_setup",),
    "pydsh.agent.prompt": ("PromptAssembly",),
    "pydsh.agent.model_selection": ("ModelSelection", "Route", "install_model_selection"),
    # tools: the contract every tool and the loop share
    "pydsh.contract.tools": (
        "TOOLS",
        "TOOLS_CHANGED",
        "TOOL_EXECUTE",
        "TOOL_POST_EXECUTE",
        "TOOL_PRE_EXECUTE",
        "TOOL_RESULT",
        "Content",
        "Settled",
        "ToolDefinition",
        "ToolError",
        "ToolExec",
        "ToolOutcome",
        "Tools",
    ),
    # models
    "pydsh.llm.keys": ("LLM",),
    "pydsh.llm.hooks": ("LLM_STREAM",),
    "pydsh.llm.types": ("LlmAdapter", "LlmError", "ModelInfo", "ProviderInfo", "StreamChunk"),
    # sessions
    "pydsh.session.keys": ("SESSIONS", "SESSION_PROJECTIONS", "SESSION_QUERY", "SESSION_TITLE"),
    "pydsh.session.hooks": ("SESSION_EVENT",),
    "pydsh.session.events": ("Event", "inherited_event_count"),
    "pydsh.session.errors": (
        "SessionError",
        "SessionFormatUnsupportedError",
        "SessionLogError",
        "SessionPersistenceCorruptionError",
        "SessionPersistenceIOError",
        "SessionPersistenceNotFoundError",
    ),
    # policy, subagents, teams
    "pydsh.policy.keys": ("APPROVAL", "USER_QUESTIONS"),
    "pydsh.subagents.keys": ("SUBAGENTS",),
    "pydsh.teams.keys": ("AGENT_TEAMS", "TEAM_ROUTES"),
    "pydsh.teams.hooks": ("ROUTES_CHANGED",),
    "pydsh.teams.service": ("Membership", "TeamRoutes"),
}

_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = [
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
]

if TYPE_CHECKING:
    from pydsh.agent.hooks import (
        AGENT_CREATED,
        AGENT_DISPOSED,
        AGENT_REQUEST,
        AGENT_STATUS,
        ASSISTANT_STREAM,
        PRE_STEP,
        PROMPT_ASSEMBLE,
        AgentCreated,
        AgentRef,
        AgentStatus,
        AssistantStream,
        PreStep,
        PreStepDecision,
        PromptAssemble,
        StepRequest,
    )
    from pydsh.agent.keys import (
        AGENT_DEFAULT_MODEL,
        AGENT_PRESETS,
        AGENTS,
        SYSTEM_PROMPT,
        WORKING_DIRECTORY,
    )
    from pydsh.agent.model_selection import (
        ModelSelection,
        Route,
        install_model_selection,
    )
    from pydsh.agent.presets import preset_setup
    from pydsh.agent.prompt import PromptAssembly
    from pydsh.agent.registry import (
        AgentHandle,
        AgentRegistry,
    )
    from pydsh.contract.agent import (
        Agent,
        AgentOptions,
        UserMessage,
        user_message,
    )
    from pydsh.contract.tools import (
        TOOL_EXECUTE,
        TOOL_POST_EXECUTE,
        TOOL_PRE_EXECUTE,
        TOOL_RESULT,
        TOOLS,
        TOOLS_CHANGED,
        Content,
        Settled,
        ToolDefinition,
        ToolError,
        ToolExec,
        ToolOutcome,
        Tools,
    )
    from pydsh.kernel.cancel import (
        AbortError,
        AbortSignal,
    )
    from pydsh.kernel.compose import dsh_home
    from pydsh.kernel.context import Context
    from pydsh.kernel.errors import (
        KernelError,
        PydshError,
    )
    from pydsh.kernel.events import (
        Bail,
        Emit,
        Next,
        Parallel,
        Serial,
        Waterfall,
    )
    from pydsh.kernel.fiber import Disposer
    from pydsh.kernel.keys import (
        HOST_INFO,
        HostInfo,
        ServiceKey,
    )
    from pydsh.llm.hooks import LLM_STREAM
    from pydsh.llm.keys import LLM
    from pydsh.llm.types import (
        LlmAdapter,
        LlmError,
        ModelInfo,
        ProviderInfo,
        StreamChunk,
    )
    from pydsh.policy.keys import (
        APPROVAL,
        USER_QUESTIONS,
    )
    from pydsh.session.errors import (
        SessionError,
        SessionFormatUnsupportedError,
        SessionLogError,
        SessionPersistenceCorruptionError,
        SessionPersistenceIOError,
        SessionPersistenceNotFoundError,
    )
    from pydsh.session.events import (
        Event,
        inherited_event_count,
    )
    from pydsh.session.hooks import SESSION_EVENT
    from pydsh.session.keys import (
        SESSION_PROJECTIONS,
        SESSION_QUERY,
        SESSION_TITLE,
        SESSIONS,
    )
    from pydsh.subagents.keys import SUBAGENTS
    from pydsh.teams.hooks import ROUTES_CHANGED
    from pydsh.teams.keys import (
        AGENT_TEAMS,
        TEAM_ROUTES,
    )
    from pydsh.teams.service import (
        Membership,
        TeamRoutes,
    )


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name this module is asked for.
    __getattr__ = lazy_names(__name__, _MODULE_OF, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
