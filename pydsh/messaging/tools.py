"""Control tools addressed by agent name — ``send_message``, ``interrupt_agent``, ``list_agents`` — and the
``subagent:identity`` runtime context (spec 07 §6, §8).

Names are resolved inside the caller's tree and grant nothing: every decision is made on session
ids after resolution (the authorization matrix of spec 07 §6.4).
"""

from __future__ import annotations

from typing import Any

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.agent.prompt import CONTEXT_ORDER
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec, ToolOutcome
from pydsh.kernel.context import Context
from pydsh.session.errors import SessionError
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.names import ROOT, SubagentError, is_segment
from pydsh.subagents.service import SubagentService

INSTRUCTIONS = (
    'To message other agents, use send_message({ agent: "<agent-name>", message: "..." }).\n'
    "Use list_agents({}) to find your collaborator agents and their names."
)
ROOT_IDENTITY = f'You are the root agent. Your name is "{ROOT}".\n\n{INSTRUCTIONS}'

SEND_MESSAGE = {
    "type": "object",
    "properties": {
        "agent": {
            "type": "string",
            "description": (
                "Who receives it: one of your direct continuable children, or your own direct parent if you are a "
                'resident continuable child. The root agent is called "lead".'
            ),
        },
        "message": {"type": "string", "description": "What to tell that agent."},
    },
    "required": ["agent", "message"],
}
INTERRUPT_AGENT = {
    "type": "object",
    "properties": {
        "agent": {
            "type": "string",
            "description": 'An agent below you — a direct child or a deeper descendant such as "reviewer/checker".',
        }
    },
    "required": ["agent"],
}
LIST_AGENTS = {
    "type": "object",
    "properties": {
        "scope": {
            "type": "string",
            "description": (
                "children (the default): your direct children, which accept send_message whatever their status. "
                "descendants: everyone below you, each with its parent's name and depth; those deeper than 1 accept "
                "only interrupt_agent."
            ),
            "enum": ["children", "descendants"],
        }
    },
}


def _caller(exec: ToolExec, tool: str) -> Any:
    if exec.agent is None:
        raise ToolError(f"{tool} requires a calling agent (exec.agent was undefined)")
    return exec.agent


class Messaging:
    """The three control tools over the ``subagents`` service."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def service(self) -> SubagentService:
        return self.ctx.require(SUBAGENTS)

    async def send_message(self, args: dict[str, Any], exec: ToolExec) -> ToolOutcome:
        caller = _caller(exec, "send_message")
        service = self.service
        target_id = await service.resolve_agent_argument(caller, str(args["agent"]))
        caller_name = await service.full_name(caller.id)
        if target_id == caller.id:
            raise SubagentError(f'agent "{caller_name}" cannot send a message to itself', "UNAUTHORIZED")
        header = caller.session.header
        parent_id = header.get("parentSession") if header.get("origin") == "subagent" else None
        if target_id == parent_id:
            message_id, target_name = await service.deliver_to_parent(caller, str(args["message"]))
        else:
            message_id = await service.deliver_to_child(caller, target_id, str(args["message"]))
            target_name = await service.full_name(target_id)
        text = f"message delivered to agent {target_name}"
        return ToolOutcome([{"type": "text", "text": text}], False, None, {"messageId": message_id})

    async def interrupt_agent(self, args: dict[str, Any], exec: ToolExec) -> ToolOutcome:
        caller = _caller(exec, "interrupt_agent")
        service = self.service
        target_id = await service.resolve_agent_argument(caller, str(args["agent"]))
        await service.interrupt(caller, target_id)
        text = f"interrupt requested for agent {await service.full_name(target_id)}"
        return ToolOutcome([{"type": "text", "text": text}], False, None, {"accepted": True})

    async def list_agents(self, args: dict[str, Any], exec: ToolExec) -> ToolOutcome:
        caller = _caller(exec, "list_agents")
        descendants = args.get("scope") == "descendants"
        rows: list[dict[str, Any]] = []
        ids: dict[str, str] = {}
        await self._rows(caller.id, await self.service.full_name(caller.id), 1, recurse=descendants, rows=rows, ids=ids)
        lines = [render_row(row, descendants) for row in rows]
        text = "\n".join(lines) if lines else "(no subagents)"
        return ToolOutcome([{"type": "text", "text": text}], False, None, {"rows": rows, "ids": ids})

    async def _rows(
        self,
        parent_id: str,
        parent_name: str,
        depth: int,
        *,
        recurse: bool,
        rows: list[dict[str, Any]],
        ids: dict[str, str],
    ) -> None:
        service = self.service
        for entry in await service.catalog_of(parent_id):
            try:
                name = await service.full_name(entry.child_id)
                header = await service.header_of(entry.child_id)
            except (OSError, SessionError):
                name, header = entry.child_id, None
            row: dict[str, Any]
            if entry.mode in ("unknown", "external"):
                row = {"kind": "diagnostic", "name": name, "reason": "unsupported"}
            elif header is None:
                row = {"kind": "diagnostic", "name": name, "reason": "unavailable"}
            else:
                live = service.agents.get(entry.child_id)
                status = "running" if live is not None and live.status == "running" else "inactive"
                row = {"kind": "child", "name": name, "status": status, "description": entry.label or ""}
            if recurse:
                row["parent"] = parent_name
                row["depth"] = depth
            if entry.mode != "one-shot":
                rows.append(row)
                ids[name] = entry.child_id
            if recurse and row["kind"] == "child":
                await self._rows(entry.child_id, name, depth + 1, recurse=recurse, rows=rows, ids=ids)


def render_row(row: dict[str, Any], descendants: bool) -> str:
    """One ``list_agents`` line (no session ids: names are what the model uses)."""
    position = f" parent={row['parent']} depth={row['depth']}" if descendants else ""
    if row["kind"] == "diagnostic":
        return f"{row['name']} [diagnostic: {row['reason']}]{position}"
    return f"{row['name']} [{row['status']}]{position} — {row['description']}"


def identity_text(service: SubagentService, agent: Any) -> str:
    """The identity section: the root text, or the child's name and its parent's (cached full names)."""
    header = agent.session.header
    if header.get("origin") != "subagent":
        return ROOT_IDENTITY
    name = service.full_names.get(agent.id, agent.id)
    if "/" in name:
        parent = name.rsplit("/", 1)[0]
    elif is_segment(name):
        parent = ROOT
    else:
        parent_id = str(header.get("parentSession"))
        parent = service.full_names.get(parent_id, parent_id)
    return f'You are a subagent. Your name is "{name}". Your parent agent is "{parent}".\n\n{INSTRUCTIONS}'


name = "agent-messaging"
inject = (TOOLS, SUBAGENTS, SYSTEM_PROMPT)


def apply(ctx: Context, config: None) -> None:
    messaging = Messaging(ctx)
    tools = ctx.require(TOOLS)
    send = ToolDefinition(
        "send_message",
        "Deliver a message to another agent. A busy agent reads it at its next step; an idle one starts a new turn "
        "with it. You get a delivery confirmation back, not the agent's reply.",
        SEND_MESSAGE,
        messaging.send_message,
    )
    tools.register(ctx, send)
    tools.register(
        ctx,
        ToolDefinition(
            "interrupt_agent",
            "Ask a subagent below you to stop what it is doing now. Returns at once, without waiting for it to "
            "stop; its own subagents keep running, and a direct child can be continued later with send_message.",
            INTERRUPT_AGENT,
            messaging.interrupt_agent,
        ),
    )
    tools.register(
        ctx,
        ToolDefinition(
            "list_agents",
            "Show the subagents you started with their names, descriptions and status (running: working now; "
            "inactive: not working now). You are told when a subagent finishes, so there is no need to poll; "
            "use send_message to continue a conversation with one.",
            LIST_AGENTS,
            messaging.list_agents,
        ),
    )

    def identity(agent: Any) -> str | None:
        if agent is None or tools.lookup(agent, "send_message") is not send:
            return None
        return identity_text(messaging.service, agent)

    ctx.require(SYSTEM_PROMPT).context(
        ctx, "subagent:identity", CONTEXT_ORDER["SUBAGENT_IDENTITY"], identity, interpolate=False
    )
