"""The delegation tools ``subagent`` / ``subagent_fork`` (spec 07 §3) and the child-only runtime contexts.

One ``tool-subagent`` row per tool. A delegation reserves the child's name synchronously, starts
an independently managed activation and returns its full name at once; with
``run_in_background: false`` it instead runs a one-shot child to its end and returns its answer.
"""

from __future__ import annotations

from typing import Any, Literal

from pydsh.agent.keys import SYSTEM_PROMPT, WORKING_DIRECTORY
from pydsh.agent.prompt import CONTEXT_ORDER, SECTION_ORDER
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec, ToolOutcome
from pydsh.kernel.config import BaseModel, ConfigDict, Field, model_validator
from pydsh.kernel.context import Context
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.service import StartRequest, SubagentService, agent_depth

DESCRIPTIONS = {
    "spawn": (
        "Delegate a self-contained task to a subagent (a separate agent that works in its own context) to offload "
        "focused, independent work — an investigation, a scoped implementation, an analysis — so it does not "
        "consume this conversation's context. The subagent returns its result, not its intermediate steps."
    ),
    "fork": (
        "Delegate a task to a subagent that inherits this conversation: a child agent that starts with all "
        "completed turns so far (it does not see the current in-flight turn). Use this when the subtask builds on "
        "this conversation's context — a follow-up analysis, a review, a continuation — without consuming this "
        "conversation's context for the work itself. You receive its result, not its intermediate steps."
    ),
}
BACKGROUND_NOTE = (
    " This tool starts an independently managed subagent and immediately returns its name. The runtime notifies "
    "you when it finishes. The child sends results with `send_message`; use `send_message` to steer it while "
    "running or continue its conversation after it finishes."
)
PROMPT_DESCRIPTIONS = {
    "spawn": (
        "The whole task for the subagent, self-contained: it cannot see this conversation, so include every fact, "
        "path and constraint it needs."
    ),
    "fork": (
        "The task for the subagent. It already has this conversation's completed turns, so refer to them freely "
        "and state only what is new."
    ),
}
NAME_DESCRIPTION = (
    "Optional name for the new subagent, unique among the subagents you started: 1-32 lowercase letters, digits, "
    'or hyphens, starting with a letter, not "lead". Omit it to get the first free agent-N. Use the returned name '
    "with send_message, interrupt_agent, and list_agents."
)
REMOVED_FIELDS = ("persona", "toolFilter")


class AgentOptionsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    provider: str | None = None
    model: str | None = None
    reasoningEffort: str | None = None
    maxTokens: int | None = Field(default=None, gt=0)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    provider: str
    toolName: str = "subagent"
    maxDepth: int | Literal["provider-managed"] | None = None
    agentOptions: AgentOptionsConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for field in REMOVED_FIELDS:
                if field in data:
                    raise ValueError(
                        f"tool-subagent: {field} is no longer supported; configure persona and tool plugins in an "
                        "Agent Preset and select it with agentPreset (spawn only)"
                    )
        return data


def parameters(provider: str) -> dict[str, Any]:
    """The model-visible schema (key order is part of the cached prefix)."""
    return {
        "type": "object",
        "properties": {
            "cwd": {
                "type": "string",
                "description": (
                    "Starting working directory of the child; a relative path resolves against your current "
                    "directory, and omitting it inherits yours. Later changes in either agent do not affect the other."
                ),
            },
            "description": {
                "type": "string",
                "description": "A short label (3-5 words) for the delegated task, shown to the user.",
            },
            "prompt": {
                "type": "string",
                "description": PROMPT_DESCRIPTIONS.get(provider, PROMPT_DESCRIPTIONS["spawn"]),
            },
            "name": {"type": "string", "description": NAME_DESCRIPTION},
            "run_in_background": {
                "type": "boolean",
                "description": (
                    "Defaults to true: the subagent runs on its own and you are notified when it finishes. Set false "
                    "to wait for a one-shot subagent and receive its final answer as this tool's result."
                ),
            },
        },
        "required": ["description", "prompt"],
    }


def _service(ctx: Context) -> SubagentService:
    return ctx.require(SUBAGENTS)


def effective_max_depth(config: Config, service: SubagentService) -> int:
    """The tool's numeric cap, else the service's; ``-1`` when the provider manages depth."""
    if config.maxDepth == "provider-managed":
        return -1
    return service.config.maxDepth if config.maxDepth is None else int(config.maxDepth)


async def delegate(ctx: Context, config: Config, args: dict[str, Any], exec: ToolExec) -> ToolOutcome:
    """Reserve a name, start the child, and return its name (or, in the foreground, its answer)."""
    parent = exec.agent
    if parent is None:
        raise ToolError("subagent tool requires a calling agent (exec.agent was undefined)")
    label = str(args["description"]).strip()
    if not label:
        raise ToolError("description must be non-empty")
    service = _service(ctx)
    background = args.get("run_in_background", True) is not False
    reservation = service.reserve(parent, args.get("name"))
    request = StartRequest(
        parent=parent,
        prompt=str(args["prompt"]),
        label=label,
        cwd=args.get("cwd"),
        max_depth=effective_max_depth(config, service),
        agent_options=config.agentOptions.model_dump(exclude_none=True) if config.agentOptions else None,
        continuable=background,
    )
    try:
        child_id = await service.start_activation(config.provider, request, reservation)
    except BaseException:
        reservation.release()
        raise
    name = service.full_names.get(child_id, child_id)
    meta = {"kind": "activation", "subagentId": child_id, "name": name}
    if background:
        return ToolOutcome([{"type": "text", "text": f"started subagent {name}"}], False, None, meta)
    return await _foreground(service, child_id, name)


async def _foreground(service: SubagentService, child_id: str, name: str) -> ToolOutcome:
    activation = service.activations[child_id]
    assert activation.settled is not None
    try:
        result = await activation.settled
    except BaseException:
        activation.agent.cancel({"kind": "parent"})
        raise
    texts = [b["text"] for b in result["content"] if b.get("type") == "text"]
    reason = result["stop_reason"]
    meta = {"kind": "one-shot", "subagentId": child_id, "name": name, "stopReason": reason}
    if reason == "completed":
        body = "\n\n".join(texts) or f"Subagent {name} finished without a closing message."
        return ToolOutcome([{"type": "text", "text": body}], False, None, meta)
    detail = "\n\n".join(texts)
    message = f"subagent {name} ended ({reason}) before it finished" + (f": {detail}" if detail else "")
    return ToolOutcome([{"type": "text", "text": f"Error: {message}"}], True, None, meta)


def depth_context(config: Config, ctx: Context) -> Any:
    """``tool:<name>:depth``: shown to an agent that cannot delegate any deeper."""

    def render(agent: Any) -> str | None:
        if agent is None:
            return None
        limit = effective_max_depth(config, _service(ctx))
        depth = agent_depth(agent)
        if limit < 0 or depth < limit:
            return None
        name = config.toolName
        return (
            f"Delegation depth for `{name}`: current {depth}, maximum {limit}, remaining levels 0. "
            f"Do not call `{name}` at this depth; carry out the work directly."
        )

    return render


def guidance(ctx: Context, tool_name: str) -> Any:
    """The delegation section, rendered once by the alphabetically first visible delegation tool."""

    def render(agent: Any) -> str | None:
        tools = ctx.get(TOOLS)
        if tools is None:
            return None
        visible = sorted(n for n in ("subagent", "subagent_fork") if tools.lookup(agent, n) is not None)
        if not visible or visible[0] != tool_name:
            return None
        listed = " or ".join(f"`{n}`" for n in visible)
        return (
            f"When several pieces of work are independent, start them together with {listed} in one message "
            "and keep working while they run."
        )

    return render


name = "tool-subagent"
inject = (TOOLS, SUBAGENTS, SYSTEM_PROMPT, WORKING_DIRECTORY)


def apply(ctx: Context, config: Config) -> None:
    if config.provider not in _service(ctx).providers:
        raise ValueError(f'subagent provider "{config.provider}" is not registered')
    description = DESCRIPTIONS.get(config.provider, DESCRIPTIONS["spawn"]) + BACKGROUND_NOTE

    async def execute(args: Any, exec: ToolExec) -> ToolOutcome:
        return await delegate(ctx, config, args, exec)

    definition = ToolDefinition(
        name=config.toolName,
        description=description,
        parameters=parameters(config.provider),
        execute=execute,
        is_concurrency_safe=lambda args: True,
    )
    ctx.require(TOOLS).register(ctx, definition)
    prompt = ctx.require(SYSTEM_PROMPT)
    prompt.section(ctx, f"tool:{config.toolName}", SECTION_ORDER["TOOL_SUBAGENT"], guidance(ctx, config.toolName))
    prompt.context(
        ctx,
        f"tool:{config.toolName}:depth",
        CONTEXT_ORDER["SUBAGENT_DELEGATION"],
        depth_context(config, ctx),
        interpolate=False,
    )
