"""Keys of the ``mcp_resources`` package: the service MCP servers register their resources with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.mcp_resources.service import McpResources

MCP_RESOURCES: ServiceKey[McpResources] = ServiceKey("mcpResources")
