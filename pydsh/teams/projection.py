"""Session projection ``agentTeam``: the Team a session leads, and its client view (spec 08 §A.7)."""

from __future__ import annotations

from typing import Any

from pydsh.session.events import Event
from pydsh.session.projections import Wire
from pydsh.subagents.names import ROOT
from pydsh.teams import board
from pydsh.teams.fold import TEAM_TYPES, TeamFold, TeamState, task_number


def client_view(state: TeamState) -> dict[str, Any]:
    """``{members, tasks, failure?}``: the Lead pseudo-row first, then teammates; non-deleted tasks."""
    members: list[dict[str, Any]] = [{"id": state.team_id, "name": ROOT, "role": "lead", "phase": "active"}]
    for member in state.members.values():
        row: dict[str, Any] = {"id": member.id, "name": member.name, "role": "teammate", "phase": member.phase}
        if member.error is not None:
            row["error"] = member.error
        members.append(row)

    def name_of(session_id: str) -> str:
        if session_id == state.team_id:
            return ROOT
        member = state.members.get(session_id)
        return member.name if member is not None else session_id

    tasks = [
        board.view(state, task, name_of)
        for task in sorted(state.tasks.values(), key=lambda t: task_number(t["id"]))
        if task["status"] != "deleted"
    ]
    out: dict[str, Any] = {"members": members, "tasks": tasks}
    if state.failure is not None:
        out["failure"] = state.failure
    return out


class TeamUnit:
    """Session projection ``agentTeam``: the Team led by the session, copy-on-write per ``team/*`` record."""

    key = "agentTeam"
    state_version = 1

    def state_schema(self, raw: object) -> TeamState:
        if not isinstance(raw, TeamState):
            raise TypeError(f"agentTeam state must be a TeamState, got {type(raw).__name__}")
        return raw

    def init(self, header: dict[str, Any], inherited_event_count: int) -> TeamState:
        return TeamState(str(header["id"]))

    wire = Wire(view=client_view, view_schema=lambda view: view)

    def apply(self, state: TeamState, event: Event) -> TeamState:
        if event["type"] not in TEAM_TYPES or state.failure is not None or event.get("ignorable"):
            return state
        return TeamFold(state.team_id).fold(state.copy(), event)
