"""Plugin ``mcp-prompt-commands``: a prompt ``/mcp__<server>__<prompt> ARGS`` runs that MCP prompt.

At its turn's first step the typed prompt is claimed (``command/run`` records it, as ``/compact`` is), the
server's ``prompts/get`` is asked with the arguments, and the prompt it returns takes the typed line's place
among the step's messages (the later pre-step listeners — instructions, skills, compaction — run as for any
prompt), so the model reads it as a logged ``user/message``; ``command/done`` says which prompt it was. A prompt
that fails ends the turn with ``command/done`` ``error`` and no model call. Arguments are ``name=value``
words, or positional in the prompt's declared order with the last one taking the rest of the line.
DeepSeek Harness has no such commands; the naming follows its MCP tool names.
"""

from __future__ import annotations

from typing import Any

from pydsh.agent.hooks import PRE_STEP, PreStep, PreStepDecision
from pydsh.contract.agent import text_of, user_message
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.mcp_resources.keys import MCP_RESOURCES
from pydsh.mcp_resources.service import McpResources, PromptCommand


def invocation(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """``(name, rest)`` when the claimed input is one user prompt starting with ``/mcp__``."""
    if len(messages) != 1 or (messages[0].get("source") or {}).get("kind") != "user":
        return None
    line = text_of(messages[0]).strip()
    if not line.startswith("/mcp__"):
        return None
    head, _, rest = line[1:].partition(" ")
    return head, rest.strip()


def arguments_of(command: PromptCommand, rest: str) -> dict[str, str]:
    """The prompt's arguments from the rest of the line: ``name=value`` words, else positional."""
    words = rest.split()
    pairs = [word.partition("=") for word in words]
    if words and all(sep and key in command.arguments for key, sep, _ in pairs):
        return {key: value for key, _, value in pairs}
    values: dict[str, str] = {}
    for index, name in enumerate(command.arguments):
        if index >= len(words):
            break
        last = index == len(command.arguments) - 1
        values[name] = " ".join(words[index:]) if last else words[index]
    return values


def usage(command: PromptCommand) -> str:
    """``/name <arg> [optional]`` for an error text."""
    shown = [f"<{a}>" if a in command.required else f"[{a}]" for a in command.arguments]
    return " ".join([f"/{command.name}", *shown])


async def expand(command: PromptCommand, rest: str) -> tuple[dict[str, Any], str | None]:
    """``command/done``'s outcome and, on success, the prompt's text."""
    arguments = arguments_of(command, rest)
    missing = [a for a in command.arguments if a in command.required and a not in arguments]
    if missing:
        return {"kind": "error", "text": f"missing argument {missing[0]}: {usage(command)}"}, None
    try:
        text = await command.provider.get_prompt(command.prompt, arguments)
    except Exception as exc:
        return {
            "kind": "error",
            "text": f'MCP prompt "{command.prompt}" of server {command.server} failed: {exc}',
        }, None
    return {"kind": "success", "text": f'MCP prompt "{command.prompt}" of server {command.server}'}, text


name = "mcp-prompt-commands"
inject = (MCP_RESOURCES,)


def apply(ctx: Context, config: None) -> None:
    """Run ``/mcp__…`` prompts at the first step of their turn."""
    service: McpResources = ctx.require(MCP_RESOURCES)

    async def on_pre_step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        messages = payload["messages"]
        called = invocation(messages) if payload["step"] == 1 else None
        command = service.prompts.lookup(payload["agent"], called[0]) if called is not None else None
        if called is None or command is None:
            return await nxt()
        session = payload["agent"].session
        command_id = messages[0]["id"]
        run = {"commandId": command_id, "name": command.name, "source": {"kind": "user"}}
        session.append("command/run", run | ({"args": called[1]} if called[1] else {}))
        outcome, text = await expand(command, called[1])
        session.append("command/done", {"commandId": command_id, **outcome})
        if text is None:
            return {"kind": "enter", "messages": []}
        decision = await nxt()  # instructions, skills and compaction see the step as for any prompt
        if decision["kind"] != "enter":
            return decision
        prompt = user_message(text)
        swapped = [prompt if m.get("id") == command_id else m for m in decision.get("messages", [])]
        return {**decision, "messages": swapped}

    ctx.on(PRE_STEP, on_pre_step, name="mcp-prompt-commands")
