"""Plugin ``mcp-resources`` (service ``mcpResources``): the resources and prompts of MCP servers.

Each MCP server registers itself as a resource provider in the scope it is mounted in (a profile's
``mcp-client`` rows at the root, a frontend's per-session servers in that agent's scope). While a scope
has at least one provider, three tools exist there — ``list_mcp_resources``,
``list_mcp_resource_templates`` and ``read_mcp_resource`` (DeepSeek Harness's names, schemas and result
text) — and a system-prompt section names the servers an agent can reach. A call reaches only a server
visible from the calling agent's scope. Servers also register their prompts here, as ``/`` commands that
:mod:`pydsh.mcp_resources.commands` runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.agent.prompt import SECTION_ORDER
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec, ToolOutcome, text
from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer
from pydsh.kernel.scope import ScopedLayers
from pydsh.mcp_resources.keys import MCP_RESOURCES

SERVER = {"type": "string", "description": "Name of a configured MCP server."}
CURSOR = {"type": "string", "description": "The continuation cursor this server returned with the previous page."}
LIST = {"type": "object", "properties": {"server": SERVER, "cursor": CURSOR}, "required": ["server"]}
READ = {
    "type": "object",
    "properties": {"server": SERVER, "uri": {"type": "string", "description": "URI of the resource to read."}},
    "required": ["server", "uri"],
}
TOOLS_OF = {
    "list_mcp_resources": ("resources/list", LIST, "Show the resources an MCP server offers."),
    "list_mcp_resource_templates": (
        "resources/templates/list",
        LIST,
        "Show an MCP server's resource URI templates, whose parameters you fill in to get a readable URI.",
    ),
    "read_mcp_resource": (
        "resources/read",
        READ,
        "Read one resource from the named MCP server, by a URI it listed or one built from its templates.",
    ),
}


class ResourceProvider(Protocol):
    """One MCP server's resource operations (``resources/list``, ``resources/templates/list``, ``resources/read``)."""

    async def resource_request(self, method: str, params: dict[str, Any], exec: ToolExec) -> dict[str, Any]: ...


class PromptProvider(Protocol):
    """One MCP server's ``prompts/get``, as the text of a user prompt."""

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str: ...


@dataclass(frozen=True)
class PromptCommand:
    """An MCP prompt offered as the ``/`` command ``/<name>``: its server, raw name and declared arguments."""

    name: str
    server: str
    prompt: str
    description: str
    arguments: tuple[str, ...]
    required: frozenset[str]
    provider: PromptProvider


def render(server: str, value: Any) -> str:
    """``MCP server: <name>`` and the result's JSON, each ``blob`` replaced by a note of its length."""
    return f"MCP server: {server}\n{json.dumps(_without_blobs(value), separators=(',', ':'), ensure_ascii=False)}"


def _without_blobs(value: Any) -> Any:
    """Binary payloads stay out of the model's history (the reference's projection)."""
    if isinstance(value, list):
        return [_without_blobs(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key == "blob" and isinstance(item, str):
            out[key] = f"[binary resource: {len(item)} base64 characters; available to programmatic callers]"
        else:
            out[key] = _without_blobs(item)
    return out


@dataclass
class Layer:
    """The providers of one scope and the tools registered for them (through one provider's context)."""

    servers: dict[str, tuple[Context, ResourceProvider]] = field(default_factory=dict)
    tools: list[Disposer] = field(default_factory=list)
    owner: str | None = None


class McpResources:
    """Scoped resource providers and the three shared tools."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.providers: ScopedLayers[ResourceProvider] = ScopedLayers(ctx.runtime.scopes, "MCP resource server")
        self.layers: dict[int, Layer] = {}
        self.prompts: ScopedLayers[PromptCommand] = ScopedLayers(ctx.runtime.scopes, "MCP prompt command")

    def register_prompts(self, ctx: Context, commands: list[PromptCommand]) -> Callable[[], None]:
        """Offer ``commands`` in ``ctx``'s scope; the remover withdraws them all."""
        removers = [self.prompts.add(ctx.scope, command.name, command) for command in commands]

        def unregister() -> None:
            for remove in removers:
                remove()

        return unregister

    def commands(self, scope: object | None) -> list[PromptCommand]:
        """The prompt commands visible from ``scope``, by name."""
        merged = self.prompts.merged(scope)
        return [merged[name] for name in sorted(merged)]

    def register(self, ctx: Context, server: str, provider: ResourceProvider) -> Callable[[], None]:
        """Make ``server``'s resources reachable from ``ctx``'s scope; the remover undoes it."""
        remove = self.providers.add(ctx.scope, server, provider)
        layer = self.layers.setdefault(id(ctx.scope), Layer())
        layer.servers[server] = (ctx, provider)
        if layer.owner is None:
            self._mount_tools(layer, server)

        def unregister() -> None:
            remove()
            if layer.servers.pop(server, None) is None:
                return
            if layer.owner == server:
                self._unmount_tools(layer)
                if layer.servers:
                    self._mount_tools(layer, next(iter(layer.servers)))
            if not layer.servers:
                self.layers.pop(id(ctx.scope), None)

        return unregister

    def _mount_tools(self, layer: Layer, owner: str) -> None:
        """Register the tools in the scope through ``owner``'s context."""
        ctx = layer.servers[owner][0]
        registry = self.ctx.require(TOOLS)
        layer.tools = [registry.register(ctx, self._definition(name)) for name in TOOLS_OF]
        layer.owner = owner

    def _unmount_tools(self, layer: Layer) -> None:
        tools, layer.tools, layer.owner = layer.tools, [], None
        for dispose in tools:
            dispose()

    def _definition(self, name: str) -> ToolDefinition:
        method, parameters, description = TOOLS_OF[name]

        async def execute(args: Any, exec: ToolExec) -> ToolOutcome:
            server = str(args.get("server", ""))
            params = {key: args[key] for key in ("cursor", "uri") if args.get(key) is not None}
            value = await self.request(server, method, params, exec)
            return ToolOutcome(text(render(server, value)), False, None, value)

        return ToolDefinition(name, description, parameters, execute)

    async def request(self, server: str, method: str, params: dict[str, Any], exec: ToolExec) -> dict[str, Any]:
        """One resource operation on a server visible from the calling agent."""
        provider = self.providers.lookup(exec.agent, server)
        if provider is None:
            raise ToolError(f'MCP resource server "{server}" is unavailable in this agent\'s scope')
        return await provider.resource_request(method, params, exec)

    def section(self, agent: Any) -> str | None:
        """The system-prompt section naming the servers ``agent`` can read resources from."""
        names = sorted(self.providers.merged(agent))
        if not names:
            return None
        return (
            "## MCP resource servers\n\n"
            "To list or read what these MCP servers publish, pass one of their names as the server argument of "
            f"list_mcp_resources, list_mcp_resource_templates or read_mcp_resource: {json.dumps(names)}."
        )


name = "mcp-resources"
inject = (TOOLS,)
optional = (SYSTEM_PROMPT,)


def apply(ctx: Context, config: None) -> None:
    """Provide ``mcpResources`` and its system-prompt section."""
    service = McpResources(ctx)
    ctx.provide(MCP_RESOURCES, service)
    prompt = ctx.get(SYSTEM_PROMPT)
    if prompt is not None:
        order = SECTION_ORDER["MCP_SERVERS"]
        prompt.section(ctx, "mcp-resource-servers", order, service.section, interpolate=False)
