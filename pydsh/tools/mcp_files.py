"""The ``mcp-servers`` row: every server of ``$DSH_HOME/mcp.json`` (and, when asked, the project's ``.mcp.json``)."""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, ConfigDict

from pydsh.kernel.context import Context
from pydsh.tools.mcp_config import McpConfigError, McpServerConfig, normalize_server_name, parse_config


class ServersFileConfig(BaseModel):
    """The ``mcp-servers`` row: ``$DSH_HOME/mcp.json``, and the project's ``.mcp.json`` only when asked
    (its commands come with whatever repository is checked out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    includeProject: bool = False


def servers_from_file(path: str) -> list[McpServerConfig]:
    """The servers an ``{"mcpServers": {...}}`` file declares; a bad file raises naming it and the entry."""
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise McpConfigError(f"{path}: {exc}") from None
    entries = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise McpConfigError(f'{path}: expected an object with an "mcpServers" object')
    configs = []
    for declared, entry in entries.items():
        try:
            configs.append(parse_config(_file_entry(normalize_server_name(declared), entry)))
        except (McpConfigError, ValueError) as exc:
            raise McpConfigError(f'{path}: server "{declared}": {exc}') from None
    return configs


def _file_entry(name: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise McpConfigError("expected an object")
    kind = entry.get("type", "stdio")
    rest = {k: v for k, v in entry.items() if k != "type"}
    if kind == "stdio":
        return {"transport": "stdio", "serverName": name, **rest}
    if kind == "http":
        return {"transport": "streamable-http", "serverName": name, **rest}
    raise McpConfigError(f"transport {kind} is not supported")


class McpServersFile:
    """The ``mcp-servers`` plugin: one server per entry of the MCP server files, later files winning."""

    inject = ("tools",)
    optional = ("system_prompt",)
    Config = ServersFileConfig

    def __init__(self, ctx: Context, config: ServersFileConfig) -> None:
        self.ctx = ctx
        self.config = config

    async def start(self) -> None:
        """Read the files, then mount every server (none fails the row; each reconnects on its own)."""
        from pydsh.kernel.compose import dsh_home
        from pydsh.tools.mcp import _warn_missing, mcp_available, mount_servers

        paths = [str(dsh_home() / "mcp.json")]
        if self.config.includeProject:
            paths.append(os.path.join(os.getcwd(), ".mcp.json"))
        merged: dict[str, McpServerConfig] = {}
        for path in paths:
            merged.update((c.serverName, c) for c in servers_from_file(path))
        if not merged:
            return
        if not mcp_available():
            _warn_missing()
            return
        await mount_servers(self.ctx, list(merged.values()))
