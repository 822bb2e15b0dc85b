"""The ``mcp-servers`` row: every server of ``$DSH_HOME/mcp.json`` (and, when asked, the project's ``.mcp.json``).

Each entry stands alone: a bad file or entry gets one warning naming it, and the others still mount.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

from pydantic import BaseModel, ConfigDict

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import TOOLS
from pydsh.kernel.context import Context
from pydsh.tools.mcp_config import McpConfigError, McpServerConfig, normalize_server_name, parse_config
from pydsh.tools.mcp_connection import describe

log = logging.getLogger("pydsh.tools.mcp")

FILE_TYPES = {"stdio": "stdio", "http": "streamable-http", "streamable-http": "streamable-http", "sse": "sse"}
"""An entry's ``type`` and the transport it names (``sse`` is the legacy HTTP+SSE transport)."""


class ServersFileConfig(BaseModel):
    """The ``mcp-servers`` row: ``$DSH_HOME/mcp.json``, and the project's ``.mcp.json`` only when asked
    (its commands come with whatever repository is checked out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    includeProject: bool = False


def servers_from_file(path: str) -> list[McpServerConfig]:
    """The valid servers an ``{"mcpServers": {...}}`` file declares; a bad file or entry is skipped with a
    warning naming it and the problem."""
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("mcp-servers: %s skipped: %s", path, exc)
        return []
    entries = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        log.warning('mcp-servers: %s skipped: expected an object with an "mcpServers" object', path)
        return []
    configs = []
    for declared, entry in entries.items():
        try:
            configs.append(parse_config(_file_entry(normalize_server_name(declared), entry)))
        except (McpConfigError, ValueError) as exc:
            log.warning('mcp-servers: %s: server "%s" skipped: %s', path, declared, exc)
    return configs


def _file_entry(name: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise McpConfigError("expected an object")
    kind = entry.get("type", "stdio")
    if kind not in FILE_TYPES:
        raise McpConfigError(f"transport {kind} is not supported (use stdio, http or sse)")
    rest = {k: v for k, v in entry.items() if k != "type"}
    return {"transport": FILE_TYPES[kind], "serverName": name, **rest}


class McpServersFile:
    """The ``mcp-servers`` plugin: one server per entry of the MCP server files, later files winning."""

    inject = (TOOLS,)
    optional = (SYSTEM_PROMPT,)
    Config = ServersFileConfig

    def __init__(self, ctx: Context, config: ServersFileConfig) -> None:
        self.ctx = ctx
        self.config = config

    async def start(self) -> None:
        """Read the files, then connect every server together; none fails the row (one that cannot start is
        skipped with a warning, the others reconnect on their own)."""
        from pydsh.kernel.compose import dsh_home
        from pydsh.tools.mcp import McpServer, _warn_missing, mcp_available

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
        servers = []
        for config in merged.values():
            server = McpServer(self.ctx, config)
            try:
                server.launch()
            except RuntimeError as exc:
                log.warning('mcp-servers: server "%s" skipped: %s', config.serverName, exc)
                continue
            servers.append(server)
        results = await asyncio.gather(*(server.ready() for server in servers), return_exceptions=True)
        for server, result in zip(servers, results, strict=True):
            if isinstance(result, Exception):
                log.warning('mcp-servers: server "%s" not mounted: %s', server.server_name, describe(result))
