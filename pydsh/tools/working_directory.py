"""The ``working_directory`` tool over the ``working_directory`` service (spec 05 §4.9)."""

from __future__ import annotations

from typing import Any

from pydsh.agent.keys import WORKING_DIRECTORY
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec
from pydsh.kernel.context import Context
from pydsh.tools.files import session_dir

PARAMETERS = {
    "type": "object",
    "properties": {
        "cd": {
            "type": "string",
            "description": "An existing directory to switch to. Leave it out to just show the current directory.",
        }
    },
}
DESCRIPTION = (
    "Show the current working directory, or switch it with cd. Relative paths are taken from the current "
    "directory. Shells and processes that are already running keep the directory they have."
)


class WorkingDirectoryTool:
    """Reads or changes the calling agent's directory; the change is logged and noted by the service."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def __call__(self, args: dict[str, Any], exec: ToolExec) -> str:
        service = self.ctx.require(WORKING_DIRECTORY)
        if exec.agent is None:
            if "cd" in args:
                raise ToolError("working-directory: cd needs a calling agent")
            return session_dir(exec)
        if "cd" not in args:
            return str(service.current(exec.agent))
        return str(service.change(exec.agent, args["cd"]))


name = "tool-working-directory"
inject = (TOOLS, WORKING_DIRECTORY)


def apply(ctx: Context, config: None) -> None:
    """Register ``working_directory``."""
    ctx.require(TOOLS).register(
        ctx, ToolDefinition("working_directory", DESCRIPTION, PARAMETERS, WorkingDirectoryTool(ctx))
    )
