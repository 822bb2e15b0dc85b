"""Typed accessors for the services the shipped plugins provide (spec 01 §3.1).

The kernel resolves services by name and knows nothing about them; these functions only give
mypy the type of a well-known name, so plugins avoid scattering ``type: ignore`` comments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydsh.agent.registry import AgentRegistry
    from pydsh.kernel.context import Context
    from pydsh.session.log import SessionStore
    from pydsh.session.projections import SessionProjections
    from pydsh.subagents.service import SubagentService


def agents(ctx: Context) -> AgentRegistry:
    registry: AgentRegistry = ctx.require("agents")
    return registry


def sessions(ctx: Context) -> SessionStore:
    store: SessionStore = ctx.require("sessions")
    return store


def subagents(ctx: Context) -> SubagentService:
    service: SubagentService = ctx.require("subagents")
    return service


def projections(ctx: Context) -> SessionProjections:
    registry: SessionProjections = ctx.require("session_projections")
    return registry
