"""The agent tree of a root session: names, statuses, outcomes and effective models (spec 12 F30).

Each node is read from its own log: the creator's ``subagent/catalog`` entries give the children
and their names, the latest ``request/header`` the effective route, the last ``turn/end`` the
outcome. Team routes (08 Part B), when the ``team_routes`` service is composed, name the source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydsh.apps.web.errors import ApiError
from pydsh.apps.web.summary import fold_events
from pydsh.session.log import Session
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.names import CATALOG
from pydsh.subagents.service import stop_reason
from pydsh.teams.keys import TEAM_ROUTES

if TYPE_CHECKING:
    from pydsh.apps.web.hub import WebHub

OUTCOMES = {
    "completed": "completed",
    "aborted": "stopped",
    "cancelled": "stopped",
    "error": "failed",
    "max-tokens": "out of tokens",
    "refusal": "declined",
    "blocked": "declined",
}
MAX_NODES = 1000


async def agent_tree(hub: WebHub, root_id: str) -> dict[str, Any]:
    """``AgentNode`` of ``root_id`` with every descendant (at most 1000 nodes)."""
    budget = [MAX_NODES]
    return await _node(hub, root_id, None, None, budget)


async def _node(hub: WebHub, session_id: str, label: str | None, team: Any, budget: list[int]) -> dict[str, Any]:
    budget[0] -= 1
    try:
        session = await hub.views.read(session_id)
    except ApiError:
        return {"sessionId": session_id, "name": session_id[:8], "status": "inactive", "children": []}
    subagents = hub.ctx.get(SUBAGENTS)
    name = await subagents.full_name(session_id) if subagents is not None else "lead"
    fold = fold_events(session.events)
    node: dict[str, Any] = {"sessionId": session_id, "name": name}
    if label:
        node["label"] = label
    children = []
    for entry in session.fold(CATALOG):
        if budget[0] <= 0:
            break
        children.append(await _node(hub, entry.child_id, entry.label, team, budget))
    node["status"] = _status(hub, session, children)
    if session.header.get("origin") == "subagent" and any(e["type"] == "turn/end" for e in session.events):
        node["outcome"] = OUTCOMES.get(stop_reason(session.events), stop_reason(session.events))
    node["model"] = _model(hub, session, fold.model, name)
    node["tokens"] = fold.tokens
    node["startedAt"] = session.header.get("createdAt")
    node["children"] = children
    return node


def _status(hub: WebHub, session: Session, children: list[dict[str, Any]]) -> str:
    agent = hub.agents.get(session.id)
    if agent is None:
        return "inactive"
    if agent.status == "running":
        return "running"
    if any(c["status"] in ("running", "waiting") for c in children):
        return "waiting"
    return "idle"


def _model(hub: WebHub, session: Session, route: dict[str, Any], name: str) -> dict[str, Any]:
    """The effective route of the latest request and where it came from."""
    out = dict(route or hub.views.default_route())
    member = session.header.get("origin") == "subagent"
    source = "descriptor" if member else "session"
    routes = hub.ctx.get(TEAM_ROUTES)
    parent = session.header.get("parentSession")
    if member and routes is not None and parent:
        try:
            _route, team_source = routes.route(str(parent), name)
        except Exception:
            team_source = None
        if team_source in ("override", "team-override"):
            source = "team-override"
        elif team_source in ("default", "team-default"):
            source = "team-default"
    out["source"] = source
    return out
