"""The Team panel's data: members with their effective models and the task board (spec 12 F32)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydsh.teams.keys import AGENT_TEAMS

if TYPE_CHECKING:
    from pydsh.apps.web.hub import WebHub

SOURCES = {"override": "team-override", "team-default": "team-default"}


def team_view(hub: WebHub, session_id: str) -> dict[str, Any] | None:
    """``{members, tasks}`` of the Team ``session_id`` leads (``None`` when it leads none or Teams is absent)."""
    teams = hub.ctx.get(AGENT_TEAMS)
    lead = hub.agents.get(session_id)
    if teams is None or lead is None:
        return None
    membership = teams.try_membership(lead)
    if membership is None or membership.role != "lead":
        return None
    from pydsh.teams import board
    from pydsh.teams.errors import TeamError
    from pydsh.teams.fold import task_number

    try:
        roster = teams.roster(lead)
        state = teams.sound_state(lead)
    except TeamError:
        return None
    members = [_member(row) for row in roster]
    tasks = [
        board.view(state, task, lambda sid: teams.name_of(lead, state, sid))
        for task in sorted(state.tasks.values(), key=lambda t: task_number(t["id"]))
        if task["status"] != "deleted"
    ]
    return {"members": members, "tasks": tasks}


def lead_of(hub: WebHub, session_id: str) -> str | None:
    """The id of the live Lead of the Team ``session_id`` belongs to, if any."""
    teams = hub.ctx.get(AGENT_TEAMS)
    agent = hub.agents.get(session_id)
    if teams is None or agent is None:
        return None
    membership = teams.try_membership(agent)
    return str(membership.lead.id) if membership is not None else None


def _member(row: dict[str, Any]) -> dict[str, Any]:
    """A roster row as the panel shows it: name, role, status, effective model and its source."""
    route = row.get("route") or ({"model": row["model"]} if row.get("model") else {})
    source = "session" if row["role"] == "lead" else SOURCES.get(str(row.get("routeSource")), "descriptor")
    out: dict[str, Any] = {"name": row["target"], "role": row["role"], "status": row["status"]}
    out["model"] = {**route, "source": source}
    if row.get("description"):
        out["description"] = row["description"]
    return out
