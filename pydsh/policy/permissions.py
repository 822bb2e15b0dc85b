"""Permission presets: the start-up policy events and preset switching (spec 05 §5.1–5.2).

A new top-level session gets ``permission/preset``, ``sandbox/mode`` and ``approval/policy`` before
any input; the default preset comes from the row's ``mode`` (``DSH_PERMISSION_MODE`` in the shipped
base bundle). Switching presets appends ``permission/preset`` and only the knobs that change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.agent.cwd import quote
from pydsh.agent.hooks import AGENT_CREATED, AgentCreated
from pydsh.contract.agent import user_message
from pydsh.kernel.config import BaseModel, ConfigDict, field_validator
from pydsh.kernel.context import Context
from pydsh.policy.keys import PERMISSIONS
from pydsh.policy.state import APPROVAL_POLICY, PRESETS, SANDBOX_MODE, preset_name

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent


class Config(BaseModel):
    """``mode``: the default preset of new sessions (one of the three preset names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: str = "workspace-write"

    @field_validator("mode")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value not in PRESETS:
            names = ", ".join(PRESETS)
            raise ValueError(f"DSH_PERMISSION_MODE must be one of {names}; got {quote(value)}")
        return value


class Permissions:
    """The ``permissions`` service: default knobs, the effective preset and ``set_permission_preset``."""

    def __init__(self, config: Config) -> None:
        self.default_preset = config.mode
        self.default_mode, self.default_policy = PRESETS[config.mode]

    def knobs(self, agent: Agent) -> tuple[str, str]:
        """The session's ``(sandbox mode, approval policy)``, defaults where nothing was logged."""
        session = agent.session
        return session.fold(SANDBOX_MODE) or self.default_mode, session.fold(APPROVAL_POLICY) or self.default_policy

    def preset(self, agent: Agent) -> str:
        """The preset matching the session's knobs, or ``custom``."""
        return preset_name(*self.knobs(agent))

    def set_permission_preset(self, agent: Agent, preset: str) -> None:
        """Switch ``agent``'s session to ``preset``; re-selecting the current knobs appends nothing."""
        if preset not in PRESETS:
            raise ValueError(f'unknown permission preset "{preset}"; expected one of {", ".join(PRESETS)}')
        mode, policy = PRESETS[preset]
        old_mode, old_policy = self.knobs(agent)
        if (mode, policy) == (old_mode, old_policy):
            return
        session = agent.session
        session.append("permission/preset", {"preset": preset})
        if mode != old_mode:
            session.append("sandbox/mode", {"mode": mode})
        if policy != old_policy:
            session.append("approval/policy", {"policy": policy})
            text = f"The approval policy changed from {quote(old_policy)} to {quote(policy)} (changed by the user)."
            agent.inject(user_message(text, {"kind": "user-approval"}))

    async def on_agent_created(self, payload: AgentCreated) -> None:
        """Log the start-up policy events of a new top-level session."""
        if payload.get("source") != "startup":
            return
        session = payload["agent"].session
        if session.header.get("origin") == "subagent" or session.fold(SANDBOX_MODE) is not None:
            return
        session.append("permission/preset", {"preset": self.default_preset})
        session.append("sandbox/mode", {"mode": self.default_mode})
        session.append("approval/policy", {"policy": self.default_policy})


name = "permission"


def apply(ctx: Context, config: Config) -> None:
    """Provide ``permissions`` and log the policy events of new sessions."""
    permissions = Permissions(config)
    ctx.provide(PERMISSIONS, permissions)
    ctx.on(AGENT_CREATED, permissions.on_agent_created)
