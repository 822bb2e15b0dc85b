"""Keys of the ``teams`` package: the team service it provides and the route service it consults."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.teams.service import AgentTeams, TeamRoutes

AGENT_TEAMS: ServiceKey[AgentTeams] = ServiceKey("agent_teams")
TEAM_ROUTES: ServiceKey[TeamRoutes] = ServiceKey("team_routes")
"""Provided by a plugin that selects teammate routes (e.g. team-models); read when listing teammates."""
