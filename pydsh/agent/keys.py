"""Keys of the services the ``agent`` package provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.agent.cwd import WorkingDirectory
    from pydsh.agent.default_model import DefaultModel
    from pydsh.agent.loop import AgentLoop
    from pydsh.agent.presets import AgentPresets
    from pydsh.agent.prompt import SystemPrompt
    from pydsh.agent.registry import AgentRegistry

AGENTS: ServiceKey[AgentRegistry] = ServiceKey("agents")
AGENT_LOOP: ServiceKey[AgentLoop] = ServiceKey("agent_loop")
SYSTEM_PROMPT: ServiceKey[SystemPrompt] = ServiceKey("system_prompt")
WORKING_DIRECTORY: ServiceKey[WorkingDirectory] = ServiceKey("working_directory")
AGENT_PRESETS: ServiceKey[AgentPresets] = ServiceKey("agent_presets")
AGENT_DEFAULT_MODEL: ServiceKey[DefaultModel] = ServiceKey("agent_default_model")
