"""The ``todo_write`` tool: the model's whole task list, logged as ``todo/write`` (spec 05 §4.8)."""

from __future__ import annotations

from typing import Any

from pydsh.contract.tools import TOOLS, ToolDefinition, ToolExec
from pydsh.kernel.context import Context

STATUSES = ("pending", "in_progress", "completed")
PARAMETERS = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "description": "The full task list; it replaces the previous one.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "content": {"type": "string", "description": "The task, as a short imperative line."},
                    "status": {
                        "type": "string",
                        "description": "pending (not started yet) | in_progress (being worked on) | completed "
                        "(finished).",
                        "enum": list(STATUSES),
                    },
                },
                "required": ["content", "status"],
            },
        }
    },
    "required": ["todos"],
}
DESCRIPTION = (
    "Keep a task list to plan multi-step work and show progress; do not use it for trivial one-step tasks. "
    "Before you start, add one todo per concrete step. While work remains, keep the todo you are working on "
    "`in_progress` (more than one only when work really runs in parallel), and mark each todo `completed` as soon "
    "as it is finished."
)


def write_todos(args: dict[str, Any], exec: ToolExec) -> str:
    """Replace the list: log it and count it by status."""
    todos = [{"content": t["content"], "status": t["status"]} for t in args["todos"]]
    if exec.session is not None:
        exec.session.append("todo/write", {"todos": todos})
    counts = {status: sum(1 for t in todos if t["status"] == status) for status in STATUSES}
    return (
        f"Updated todo list: {counts['pending']} pending, {counts['in_progress']} in progress, "
        f"{counts['completed']} completed."
    )


name = "tool-todo"
inject = (TOOLS,)


def apply(ctx: Context, config: None) -> None:
    """Register ``todo_write``."""
    ctx.require(TOOLS).register(ctx, ToolDefinition("todo_write", DESCRIPTION, PARAMETERS, write_todos))
