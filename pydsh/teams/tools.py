"""The Team tools, the ``team:policy`` section and the ``team:identity`` context (spec 08 §A.8–§A.9).

Registered in each member's own agent scope when the member is created, so for Team members they
shadow the global control tools of the same names (``send_message``, ``list_agents``,
``interrupt_agent``) while plain subagents keep those. Every result is the compact JSON of its value.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydsh.agent.hooks import AGENT_CREATED, AgentCreated
from pydsh.agent.keys import AGENTS, SYSTEM_PROMPT
from pydsh.agent.prompt import CONTEXT_ORDER, SECTION_ORDER
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec, ToolOutcome
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.teams.keys import AGENT_TEAMS
from pydsh.teams.service import AgentTeams

POLICY_HEAD = (
    "Agent Teams is available in this session\n\n"
    "The Team Lead and all teammates share the same working directory and filesystem. Edits are immediately "
    "visible to every member. Split write work into disjoint scopes, record expected write scopes on shared tasks, "
    "and use task dependencies when work must be ordered. Write-scope overlap is advisory, not a lock.\n\n"
    "Prefer read/edit/write for file changes. If a file operation returns FS_STALE_VERSION, read the current file, "
    "rebase your intended change onto the new content, and retry. Bash, formatters, code generators, and scripts are "
    "not fully protected by the filesystem version guard; coordinate them explicitly and have the Lead review the "
    "final diff and run tests.\n\n"
    "Use the target returned by spawn_teammate or list_agents for send_message{interrupt}, or as owner when "
    "assigning or filtering shared tasks. "
)
POLICY_TAIL = (
    "send_message steers a running target at its nearest step boundary and starts or resumes an inactive target. "
    "inactive means no turn is executing; it does not describe task completion, success, failure, or waiting for "
    "other agents. provisioning means member creation is in progress; failed means member creation failed. A peer "
    "message starts with its sender name. A successful send does not mean the recipient has processed it. "
    "Shared-task workflow is list, get, claim with the current revision, perform the work, then complete. Task "
    "readiness never starts an owner. Before wait_agent, use list_agents and make sure another required member is "
    "running or provisioning; use send_message first when the required member is inactive. wait_agent observes "
    "only changes after that call starts, never wakes a member, and returns noProgress immediately when no other "
    "member can produce a change. Re-list after wakeup or timeout. The Lead must wait for required teammates "
    "before giving the final answer."
)
LEAD_IDENTITY = (
    'You are the Team Lead named "lead".\n'
    "Use list_agents({}) to find your teammates and their names.\n"
    'To message another teammate, use send_message({ target: "<teammate name>", message: "..." }).'
)
TEAMMATE_IDENTITY = (
    'You are teammate "{name}".\n'
    'Your Team Lead is named "lead".\n'
    'To message your Team Lead, use send_message({{ target: "lead", message: "..." }}).\n'
    "Use list_agents({{}}) to find your teammates and their names.\n"
    'To message another teammate, use send_message({{ target: "<teammate name>", message: "..." }}).'
)
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def policy(interrupt: bool) -> str:
    """The ``team:policy`` section; ``interrupt_agent`` is named only when it is registered."""
    return POLICY_HEAD.format(interrupt=" and interrupt_agent" if interrupt else "") + POLICY_TAIL


def identity(role: str, name: str) -> str:
    return LEAD_IDENTITY if role == "lead" else TEAMMATE_IDENTITY.format(name=name)


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


SPAWN_TEAMMATE = {
    "type": "object",
    "properties": {
        "name": _string("Unique lower-kebab-case teammate name."),
        "description": _string("Short description of the delegated responsibility."),
        "prompt": _string("Complete initial task for the teammate."),
        "context": {
            "type": "string",
            "enum": ["fresh", "fork"],
            "description": "fresh starts without Lead history; fork inherits completed Lead turns. Defaults to fresh.",
        },
    },
    "required": ["name", "description", "prompt"],
}
SEND_MESSAGE = {
    "type": "object",
    "properties": {
        "target": _string("Member target returned by spawn_teammate or list_agents, including lead."),
        "message": _string("Self-contained message for the target."),
    },
    "required": ["target", "message"],
}
WAIT_AGENT = {
    "type": "object",
    "properties": {
        "timeout_ms": {
            "type": "integer",
            "description": "Wait duration in milliseconds, from 10000 through 3600000. Defaults to 30000.",
        }
    },
}
INTERRUPT_AGENT = {
    "type": "object",
    "properties": {"target": _string("Teammate target returned by spawn_teammate or list_agents.")},
    "required": ["target"],
}
STRING_LIST = {"type": "array", "items": {"type": "string"}}
TASK_CREATE = {
    "type": "object",
    "properties": {
        "subject": _string("Concise task title."),
        "description": _string("Complete task details and acceptance criteria."),
        "blocked_by": {**STRING_LIST, "description": "Task ids that must complete first."},
        "write_scopes": {
            **STRING_LIST,
            "description": "Advisory workspace-relative file or directory prefixes this task expects to modify.",
        },
    },
    "required": ["subject", "description"],
}
TASK_LIST = {
    "type": "object",
    "properties": {
        "status": {
            "type": "string",
            "enum": ["pending", "in_progress", "completed"],
            "description": "Optional exact status filter.",
        },
        "owner": _string(
            "Optional member target from spawn_teammate or list_agents, matching ownerName; use unowned for tasks "
            "without an owner."
        ),
        "ready": {"type": "boolean", "description": "Optional readiness filter."},
        "cursor": {"type": "integer", "description": "Zero-based result offset. Defaults to 0."},
        "limit": {"type": "integer", "description": "Number of rows, 1 through 100. Defaults to 50."},
    },
}
TASK_GET = {
    "type": "object",
    "properties": {"task_id": _string("Shared task id.")},
    "required": ["task_id"],
}
TASK_UPDATE = {
    "type": "object",
    "properties": {
        "task_id": _string("Shared task id."),
        "expected_revision": {
            "type": "integer",
            "description": "Current task revision used as the CAS precondition.",
        },
        "action": {
            "type": "string",
            "enum": ["claim", "release", "edit", "set_dependencies", "complete", "reopen", "reassign", "delete"],
            "description": "Task transition to apply.",
        },
        "subject": _string("Replacement title for edit."),
        "description": _string("Replacement details for edit."),
        "blocked_by": {**STRING_LIST, "description": "Complete blocker list for set_dependencies."},
        "write_scopes": {**STRING_LIST, "description": "Replacement advisory write scopes for edit."},
        "owner": _string("Member target from spawn_teammate or list_agents for Lead-only reassign; omit to unassign."),
    },
    "required": ["task_id", "expected_revision", "action"],
}
DESCRIPTIONS = {
    "spawn_teammate": "Create one named, durable teammate. Only the Team Lead may call this tool.",
    "send_message": (
        "Send one message to another Team member. A running target receives it at the nearest step boundary; an "
        "inactive target starts or resumes a turn."
    ),
    "list_agents": (
        "List the Lead and every durable teammate with an addressable target and current availability. inactive "
        "means no turn is executing, not a task result. provisioning and failed describe member creation."
    ),
    "wait_agent": (
        "Wait for the next teammate status, message, or shared-task change after this call starts. This never wakes "
        "inactive members and returns noProgress immediately when no other member is running or provisioning. "
        "Re-list after wakeup or timeout instead of polling."
    ),
    "interrupt_agent": ("Interrupt one teammate's current turn while preserving its pending inbox. Team Lead only."),
    "team_task_create": "Create one unowned pending task on the shared Team task board.",
    "team_task_list": ("List shared tasks, including readiness, owner, revision, blockers, and write-scope warnings."),
    "team_task_get": "Read the complete latest value of one shared task before changing or executing it.",
    "team_task_update": (
        "Compare-and-set a shared task action using the latest revision from team_task_get or team_task_list."
    ),
}


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    interrupt: bool = True
    freshProvider: str = "spawn"
    forkProvider: str = "fork"


def render(value: Any) -> str:
    """A tool result: the compact JSON of its value."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


Body = Callable[[Any, dict[str, Any], ToolExec], Awaitable[Any]]


def definitions(teams: AgentTeams, config: Config) -> list[ToolDefinition]:
    """The Team tool definitions, bound to the service (``interrupt_agent`` only when configured)."""
    providers = {"fresh": config.freshProvider, "fork": config.forkProvider}

    async def spawn(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return await teams.spawn(agent, args, providers)

    async def send(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return await teams.send_message(agent, args)

    async def roster(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return teams.roster(agent)

    async def wait(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return await teams.wait(agent, args, exec.signal)

    async def interrupt(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return await teams.interrupt(agent, args)

    async def create(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return await teams.create_task(agent, args)

    async def listing(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return teams.list_tasks(agent, args)

    async def get(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return teams.get_task(agent, args)

    async def update(agent: Any, args: dict[str, Any], exec: ToolExec) -> Any:
        return await teams.update_task(agent, args)

    rows: list[tuple[str, dict[str, Any], Body]] = [
        ("spawn_teammate", SPAWN_TEAMMATE, spawn),
        ("send_message", SEND_MESSAGE, send),
        ("list_agents", NO_PARAMETERS, roster),
        ("wait_agent", WAIT_AGENT, wait),
        ("team_task_create", TASK_CREATE, create),
        ("team_task_list", TASK_LIST, listing),
        ("team_task_get", TASK_GET, get),
        ("team_task_update", TASK_UPDATE, update),
    ]
    if config.interrupt:
        rows.append(("interrupt_agent", INTERRUPT_AGENT, interrupt))
    return [_definition(name, parameters, body) for name, parameters, body in rows]


def _definition(name: str, parameters: dict[str, Any], body: Body) -> ToolDefinition:
    async def execute(args: Any, exec: ToolExec) -> ToolOutcome:
        if exec.agent is None:
            raise ToolError(f"{name} requires a calling Agent")
        value = await body(exec.agent, args if isinstance(args, dict) else {}, exec)
        return ToolOutcome([{"type": "text", "text": render(value)}], False, None, value)

    return ToolDefinition(name, DESCRIPTIONS[name], parameters, execute)


name = "tool-agent-team"
inject = (AGENT_TEAMS, TOOLS, SYSTEM_PROMPT)


def apply(ctx: Context, config: Config) -> None:
    """Mount the Team tools, policy and identity in every member's own scope as the member is created."""
    teams: AgentTeams = ctx.require(AGENT_TEAMS)
    tools = ctx.require(TOOLS)
    prompt = ctx.require(SYSTEM_PROMPT)
    text = policy(config.interrupt)

    def mount(agent: Any) -> None:
        membership = teams.try_membership(agent)
        if membership is None:
            return
        role, member_name = membership.role, membership.name
        agent_ctx: Context = agent.ctx
        disposers = [tools.register(agent_ctx, d) for d in definitions(teams, config)]
        disposers.append(
            prompt.section(agent_ctx, "team:policy", SECTION_ORDER["TEAM_POLICY"], text, interpolate=False)
        )
        disposers.append(
            prompt.context(
                agent_ctx,
                "team:identity",
                CONTEXT_ORDER["TEAM_IDENTITY"],
                identity(role, member_name),
                required=True,
                interpolate=False,
            )
        )
        for disposer in disposers:
            agent_ctx.register(ctx.register(disposer))

    async def on_created(payload: AgentCreated) -> None:
        mount(payload["agent"])

    ctx.on(AGENT_CREATED, on_created)
    for agent in ctx.require(AGENTS).all():
        mount(agent)
