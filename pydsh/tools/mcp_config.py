"""Configuration of the MCP client: server names, public tool names and the ``mcp-client`` row's keys (spec 11 §B.1)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pydsh.kernel.errors import PydshError
from pydsh.tools.mcp_limits import MAX_MESSAGE_BYTES

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_-]+")
MAX_TOOL_NAME = 64


class McpConfigError(PydshError, ValueError):
    """A server spec given to :func:`mount_servers` is invalid; the message names the field."""


# -- names --------------------------------------------------------------------------------------


def public_tool_name(server_name: str, raw_name: str) -> str:
    """The model-facing name of ``raw_name`` on ``server_name``: ``mcp__<server>__<raw>``, or a safe
    prefix plus a hash of both names when that is not a valid name of at most 64 characters."""
    joined = f"mcp__{server_name}__{raw_name}"
    normalized = _UNSAFE.sub("_", joined)
    if normalized == joined and len(joined) <= MAX_TOOL_NAME:
        return joined
    digest = hashlib.sha256(f"{server_name}\0{raw_name}".encode()).hexdigest()[:12]
    return f"{normalized[:51]}_{digest}"


def normalize_server_name(name: str) -> str:
    """A server name a frontend declared, made a valid ``serverName`` (spec 11 §A.8).

    Raises ``ValueError`` for a blank name or one with control characters.
    """
    if not name.strip() or any(unicodedata.category(c) == "Cc" for c in name):
        raise ValueError("invalid server name")
    if SERVER_NAME.match(name):
        return name
    folded = _UNSAFE_RUN.sub("_", unicodedata.normalize("NFKD", name)).strip("_")[:20] or "server"
    return f"{folded}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"[:32]


# -- configuration ------------------------------------------------------------------------------


class ReconnectConfig(BaseModel):
    """Backoff of reconnect attempts: ``min(maxDelayMs, initialDelayMs * 2^(attempt-1))``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    initialDelayMs: Annotated[int, Field(ge=0)] = 500
    maxDelayMs: Annotated[int, Field(ge=0)] = 30000
    maxAttempts: Annotated[int, Field(ge=1)] = 10

    @model_validator(mode="after")
    def _ordered(self) -> ReconnectConfig:
        if self.initialDelayMs > self.maxDelayMs:
            raise ValueError("initialDelayMs must not exceed maxDelayMs")
        return self

    def delay_ms(self, attempt: int) -> int:
        return int(min(self.maxDelayMs, self.initialDelayMs * 2 ** (attempt - 1)))


_STDIO_KEYS = frozenset({"command", "args", "env", "cwd"})
_HTTP_KEYS = frozenset({"url", "headers"})


class McpServerConfig(BaseModel):
    """One MCP server (spec 11 §B.1, plus the startup wait and the limits of issue 21)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    transport: Literal["stdio", "streamable-http", "sse"]
    serverName: Annotated[str, Field(pattern=SERVER_NAME.pattern)]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str = ""
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    toolCallTimeoutMs: Annotated[int, Field(ge=1)] = 60000
    requestTimeoutMs: Annotated[int, Field(ge=1)] = 30000
    """Bound of ``initialize`` and of each ``tools/list`` page."""
    startupWaitMs: Annotated[int, Field(ge=0)] = 5000
    """How long activation waits for the first connection before going on without it (unless failOnStartupError)."""
    failOnStartupError: bool = False
    maxInstructionBytes: Annotated[int, Field(ge=0)] = 32768
    maxTools: Annotated[int, Field(ge=1)] = 200
    """The most tools registered from this server (the first ones in listed order)."""
    maxToolDefinitionBytes: Annotated[int, Field(ge=1)] = 256 * 1024
    """The most bytes of tool definitions (name, description, parameters as JSON) sent from this server."""
    maxResultBytes: Annotated[int, Field(ge=1)] = 4 * 1024 * 1024
    """The most text one tool result may bring (its content items projected and joined)."""
    maxMessageBytes: Annotated[int, Field(ge=1)] = MAX_MESSAGE_BYTES
    """The largest single message read from the server; a longer one is refused without being held."""
    reconnect: ReconnectConfig = ReconnectConfig()

    @model_validator(mode="after")
    def _transport_keys(self) -> McpServerConfig:
        stdio = self.transport == "stdio"
        foreign = sorted(self.model_fields_set & (_HTTP_KEYS if stdio else _STDIO_KEYS))
        if foreign:
            raise ValueError(f"{', '.join(foreign)} do not apply to transport {self.transport}")
        if stdio and not self.command:
            raise ValueError("transport stdio needs a command")
        if not stdio and not (self.url or "").startswith(("http://", "https://")):
            raise ValueError(f"transport {self.transport} needs an absolute http(s) url")
        return self


def parse_config(spec: McpServerConfig | Mapping[str, Any]) -> McpServerConfig:
    """``spec`` as a validated :class:`McpServerConfig`; problems raise :class:`McpConfigError`."""
    if isinstance(spec, McpServerConfig):
        return spec
    try:
        return McpServerConfig.model_validate(dict(spec))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(config)'}: {err['msg']}" for err in exc.errors()
        )
        raise McpConfigError(f"mcp server config: {problems}") from None


def server_environ(extra: Mapping[str, str]) -> dict[str, str]:
    """The stdio server's environment: the scrubbed parent environment with ``extra`` over it."""
    from pydsh.tools.protected import child_environ

    return {**child_environ(), **extra}
