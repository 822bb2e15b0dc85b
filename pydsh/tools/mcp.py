"""The MCP client: external tool servers (stdio or streamable HTTP) mounted as model-facing tools (spec 11 Part B).

One ``mcp-client`` row per server, or :func:`mount_servers` for servers a frontend declares per
session (the ACP bridge). Each server is one :class:`McpServer`: a task owning the connection
(``mcp`` transport + ``ClientSession``, one generation per attempt), the registered tools of the
last successful sync and the ``mcp:<serverName>`` prompt section. The ``mcp`` package is imported
only when a server starts; without it a row warns once and contributes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import time
import unicodedata
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer
from pydsh.tools.pipeline import text
from pydsh.tools.registry import ToolDefinition, ToolError, ToolExec, ToolOutcome, ToolRegistry

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.client.session import IncomingMessage

log = logging.getLogger("pydsh.tools.mcp")

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_-]+")
MAX_TOOL_NAME = 64
MCP_SERVERS_ORDER = 3100
INSTALL_HINT = "pip install 'pydsh[mcp]'"
CLOSE_CONFIRM_S = 5.0
REQUEST_TIMEOUT_S = 30.0
"""Bound of ``initialize`` and each ``tools/list`` page (calls use ``toolCallTimeoutMs``)."""
MAX_LIST_PAGES = 1000
STDERR_LINE_LIMIT = 4096


class McpUnavailableError(RuntimeError):
    """The optional ``mcp`` package is not installed."""


class McpConfigError(ValueError):
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
    """One MCP server (spec 11 §B.1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    transport: Literal["stdio", "streamable-http"]
    serverName: Annotated[str, Field(pattern=SERVER_NAME.pattern)]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str = ""
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    toolCallTimeoutMs: Annotated[int, Field(ge=1)] = 60000
    failOnStartupError: bool = False
    maxInstructionBytes: Annotated[int, Field(ge=0)] = 32768
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
            raise ValueError("transport streamable-http needs an absolute http(s) url")
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


# -- results ------------------------------------------------------------------------------------


def _media(item: Mapping[str, Any]) -> str:
    mime = item.get("mimeType")
    return mime if isinstance(mime, str) and mime else "unknown media type"


def project_item(item: Any) -> str:
    """The model text of one MCP content item (spec 11 §B.5)."""
    if not isinstance(item, Mapping):
        return "[unsupported MCP content block: expected an object]"
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind == "resource_link":
        name, uri = item.get("name"), item.get("uri")
        if not name or not uri:
            return "[resource link unavailable: the MCP block is missing its name or URI]"
        return f"Resource link: {name} ({uri})"
    if kind == "image":
        return (
            f"[image unavailable: {_media(item)}; no attachment store is mounted; "
            "raw image data remains available to programmatic callers]"
        )
    if kind == "audio":
        return f"[audio result unsupported: {_media(item)}; raw audio data remains available to programmatic callers]"
    if kind == "resource":
        return "[embedded resource unsupported; raw resource data remains available to programmatic callers]"
    return f"[unsupported MCP content type: {kind}]"


def project_content(raw_name: str, items: Sequence[Any]) -> str:
    """The whole result as one text: projected items joined by newlines, or a note that it is empty."""
    if not items:
        return f"({raw_name} returned no model-visible content)"
    return "\n".join(project_item(item) for item in items)


def _invalid_result(raw_name: str, issues: str) -> ToolError:
    return ToolError(f'Tool "{raw_name}" returned an invalid MCP result: {issues}', "MCP_INVALID_RESULT")


def _issues(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(result)'}: {err['msg']}" for err in exc.errors())


# -- one server ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListedTool:
    """One tool as the server listed it, with its public name."""

    public: str
    raw: str
    description: str
    parameters: dict[str, Any]
    task_required: bool


_LIVE: weakref.WeakKeyDictionary[object, dict[tuple[int, str], McpServer]] = weakref.WeakKeyDictionary()
"""Live servers per runtime, keyed by (registration scope identity, serverName)."""


class McpServer:
    """One configured server: its connection task, its registered tools and its instructions section.

    Also the ``mcp-client`` plugin (class form): the row's fiber instance is its server.
    """

    inject = ("tools",)
    optional = ("system_prompt",)
    Config = McpServerConfig

    def __init__(self, ctx: Context, config: McpServerConfig, *, cwd: str | None = None) -> None:
        self.ctx = ctx
        self.config = config
        self.server_name = config.serverName
        self.label = f"mcp-client({self.server_name})"
        self.cwd = config.cwd or cwd or os.getcwd()
        self.tools: list[ListedTool] = []
        self.instructions: str | None = None
        self.session: ClientSession | None = None
        self.closed = False
        self._registered: list[Disposer] = []
        self._effects: list[Disposer] = []
        self._signature: list[tuple[str, str, str, Any, bool]] | None = None
        self._sync_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._first: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self._generation: _Generation | None = None
        self._key = (id(ctx.scope), self.server_name)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Claim the name, register the instructions section and connect (activation waits for the
        first attempt); ``failOnStartupError`` turns a failed first attempt into an error. Without the
        ``mcp`` package, warn once and contribute nothing."""
        if not mcp_available():
            _warn_missing()
            return
        live = _LIVE.setdefault(self.ctx.runtime, {})
        if self._key in live:
            raise RuntimeError(
                f'mcp-client: serverName "{self.server_name}" is already in use by another mcp-client instance — '
                "pick a unique serverName in the profile"
            )
        live[self._key] = self
        self._effects.append(self.ctx.register(self.close))
        prompt = self.ctx.get("system_prompt")
        if prompt is not None:
            name = f"mcp:{self.server_name}"
            self._effects.append(prompt.section(self.ctx, name, MCP_SERVERS_ORDER, self._section, interpolate=False))
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.label)
        self._task.add_done_callback(self._ended)
        error = await asyncio.shield(self._first)
        if error is None:
            return
        if self.config.failOnStartupError:
            await self.close()
            raise RuntimeError(f"{self.label}: initial connection or tool synchronization failed") from error
        log.warning("%s: initial connection failed: %s", self.label, _describe(error))

    async def close(self) -> None:
        """Stop the connection task (the server process is terminated) and drop this server's tools."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        task = self._task
        if task is not None and task is not asyncio.current_task():
            if not task.done() and self._generation is not None:
                self._generation.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
        if self._generation is not None:
            self._generation.release()
        self._unregister()
        self.instructions = None
        live = _LIVE.get(self.ctx.runtime)
        if live is not None and live.get(self._key) is self:
            del live[self._key]
        for effect in reversed(self._effects):
            await effect()  # the section's removal, and this method's own entry (a no-op now)
        self._effects.clear()

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not self._first.done():
            self._first.set_result(RuntimeError(f"{self.label}: the connection task ended before connecting"))

    def connected(self, session: ClientSession, instructions: str) -> None:
        """A generation is up: route calls to ``session`` and show its instructions."""
        self.instructions = instructions or None
        self.session = session
        if not self._first.done():
            self._first.set_result(None)

    def _section(self, agent: Any) -> str | None:
        if not self.instructions:
            return None
        return f"### MCP server: {self.server_name}\n\n{self.instructions}"

    # -- the connection task --------------------------------------------------------------------

    async def _run(self) -> None:
        """Connect, serve until the connection drops, reconnect with backoff (spec 11 §B.6)."""
        reconnect = self.config.reconnect
        attempt = 0
        ever_connected = False
        while not self._stop.is_set():
            generation = _Generation(self)
            self._generation = generation
            error = await generation.run()
            if not self._first.done():
                self._first.set_result(error)
            ever_connected = ever_connected or generation.connected_at is not None
            if not await generation.confirm_closed():
                log.error(
                    "%s: the server process did not exit within %.0fs of closing its connection — not reconnecting "
                    "(never two server processes for one name)",
                    self.label,
                    CLOSE_CONFIRM_S,
                )
                return
            if self._stop.is_set():
                return
            if error is not None and not ever_connected and self.config.failOnStartupError:
                return
            if generation.uptime_ms() >= reconnect.maxDelayMs:
                attempt = 0
            attempt += 1
            if not reconnect.enabled:
                log.error("%s: connection ended and reconnect is disabled: %s", self.label, _describe(error))
                return
            if attempt > reconnect.maxAttempts:
                self._give_up()
                return
            delay = reconnect.delay_ms(attempt)
            what = "connection lost; reconnecting" if ever_connected else "connection failed; retrying"
            detail = f": {_describe(error)}" if error is not None else ""
            log.warning(
                "%s: %s in %dms (attempt %d/%d)%s", self.label, what, delay, attempt, reconnect.maxAttempts, detail
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay / 1000)

    def _give_up(self) -> None:
        self._unregister()
        self.instructions = None
        log.error(
            "%s: giving up after %d consecutive failed reconnect attempts — tools unregistered; "
            "reload the plugin or restart to reconnect",
            self.label,
            self.config.reconnect.maxAttempts,
        )

    # -- tool sync ------------------------------------------------------------------------------

    async def sync(self, session: ClientSession) -> None:
        """List every tool, build the next generation, then swap it in; a failure keeps the current one."""
        async with self._sync_lock:
            listed = await self._list(session)
            generation = self._build(listed)
            if self.closed or not self.ctx.fiber.accepts_effects:
                return
            self._swap(generation)

    async def _list(self, session: ClientSession) -> list[Any]:
        import mcp_types as types

        capabilities = session.server_capabilities
        if capabilities is None or capabilities.tools is None:
            return []
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
        raise RuntimeError(f"{self.label}: the tool list did not end after {MAX_LIST_PAGES} pages")

    def _build(self, listed: list[Any]) -> list[ListedTool]:
        seen: dict[str, str] = {}
        out: list[ListedTool] = []
        for tool in listed:
            raw = tool.name
            if raw in seen:
                raise RuntimeError(f'{self.label}: server listed tool "{raw}" more than once — invalid tool list')
            public = public_tool_name(self.server_name, raw)
            if public in seen.values():
                raise RuntimeError(f'{self.label}: two tools map to the public name "{public}" — invalid tool list')
            seen[raw] = public
            schema = dict(tool.input_schema)
            if schema.get("type") != "object":
                raise RuntimeError(f'{self.label}: tool "{raw}" has no object-rooted inputSchema — invalid tool list')
            execution = tool.execution
            required = execution is not None and execution.task_support == "required"
            out.append(ListedTool(public, raw, tool.description or "", schema, required))
        return out

    def _swap(self, generation: list[ListedTool]) -> None:
        signature = [(t.public, t.raw, t.description, t.parameters, t.task_required) for t in generation]
        if signature == self._signature:
            return
        self._unregister()
        registry: ToolRegistry = self.ctx.require("tools")
        registered: list[Disposer] = []
        try:
            for tool in generation:
                registered.append(registry.register(self.ctx, self._definition(tool)))
        except Exception as exc:
            for dispose in registered:
                dispose()
            log.error("%s: tool registration failed, no tools registered: %s", self.label, exc)
            return
        self._registered = registered
        self.tools = generation
        self._signature = signature

    def _unregister(self) -> None:
        registered, self._registered = self._registered, []
        for dispose in registered:
            dispose()
        self.tools = []
        self._signature = None

    def _definition(self, tool: ListedTool) -> ToolDefinition:
        async def execute(args: Any, exec: ToolExec) -> ToolOutcome:
            return await self.call(tool, args, exec)

        return ToolDefinition(tool.public, tool.description, tool.parameters, execute)

    # -- calls ----------------------------------------------------------------------------------

    async def call(self, tool: ListedTool, args: Any, exec: ToolExec) -> ToolOutcome:
        """One ``tools/call`` with the validated arguments; failures raise :class:`ToolError`."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        raw = tool.raw
        if tool.task_required:
            raise ToolError(
                f'Tool "{raw}" requires task-based execution, which this bridge does not support', "MCP_TASK_REQUIRED"
            )
        session = self.session
        if session is None:
            raise ToolError(f"{self.label}: server is disconnected", "MCP_DISCONNECTED")
        timeout_ms = self.config.toolCallTimeoutMs
        arguments = args if isinstance(args, dict) else {}
        try:
            result = await session.call_tool(raw, arguments, read_timeout_seconds=timeout_ms / 1000)
        except MCPError as exc:
            if exc.error.code == REQUEST_TIMEOUT:
                raise ToolError(f"{self.label}: tool call timed out after {timeout_ms}ms", "MCP_TIMEOUT") from None
            if exc.error.code == CONNECTION_CLOSED:
                raise ToolError(f"{self.label}: server is disconnected", "MCP_DISCONNECTED") from None
            raise ToolError(f'{self.label}: tool "{raw}" failed: {exc.error.message}', "MCP_ERROR") from None
        except ValidationError as exc:
            raise ToolError(
                f'Tool "{raw}" returned an invalid MCP result: {_issues(exc)}', "MCP_INVALID_RESULT"
            ) from None
        except RuntimeError as exc:
            raise ToolError(f'Tool "{raw}" returned an invalid MCP result: {exc}', "MCP_INVALID_RESULT") from None
        except Exception as exc:
            if self.session is not session:
                raise ToolError(f"{self.label}: server is disconnected", "MCP_DISCONNECTED") from None
            raise ToolError(f'{self.label}: tool "{raw}" failed: {_describe(exc)}', "MCP_ERROR") from None
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        projected = project_content(raw, dumped.get("content") or [])
        meta: dict[str, Any] = {"server": self.server_name, "tool": raw}
        if "structuredContent" in dumped:
            meta["structuredContent"] = dumped["structuredContent"]
        if result.is_error:
            return ToolOutcome(text(f"Error: {projected}"), True, None, meta)
        return ToolOutcome(text(projected), False, None, meta)


class _Generation:
    """One connection attempt: transport, session, initialize, sync, then serve until it drops."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.config = server.config
        self.connected_at: float | None = None
        self.ended_at: float | None = None
        self._scope: Any = None
        self._cancelled = False
        self._lost: asyncio.Event = asyncio.Event()
        self._stderr: _StderrLog | None = None
        self._session: ClientSession | None = None

    def cancel(self) -> None:
        """Abandon this generation from another task (closing the server)."""
        self._cancelled = True
        self._lost.set()
        if self._scope is not None:
            self._scope.cancel()

    def uptime_ms(self) -> float:
        if self.connected_at is None:
            return 0.0
        return ((self.ended_at or time.monotonic()) - self.connected_at) * 1000

    async def run(self) -> BaseException | None:
        """Serve one generation; returns why it failed (``None`` after a drop of a good connection)."""
        import anyio

        server = self.server
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancelled:
                    scope.cancel()
                await self._serve()
        except Exception as exc:
            return _leaf(exc)
        finally:
            server.session = None
            self.ended_at = time.monotonic()
        if self.connected_at is None and not self._cancelled:
            return RuntimeError(f"{server.label}: connection closed during startup")
        return None

    async def _serve(self) -> None:
        import anyio
        from mcp import ClientSession, Implementation

        from pydsh import __version__

        server = self.server
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            relay_send, relay_read = anyio.create_memory_object_stream[Any](0)
            stack.callback(relay_read.close)
            stack.callback(relay_send.close)
            group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(group.cancel_scope.cancel)
            group.start_soon(self._relay, read, relay_send)
            session = await stack.enter_async_context(
                ClientSession(
                    relay_read,
                    write,
                    read_timeout_seconds=REQUEST_TIMEOUT_S,
                    client_info=Implementation(name="pydsh-mcp-client", version=__version__),
                    message_handler=self._on_message,
                )
            )
            self._session = session
            init = await session.initialize()
            instructions = (init.instructions or "").rstrip()
            limit = self.config.maxInstructionBytes
            if len(instructions.encode()) > limit:
                raise RuntimeError(f"{server.label}: server instructions exceed maxInstructionBytes ({limit})")
            await server.sync(session)
            server.connected(session, instructions)
            self.connected_at = time.monotonic()
            await self._lost.wait()

    async def _relay(self, source: Any, sink: Any) -> None:
        """Forward the transport's messages to the session; its end is the connection's end."""
        try:
            async with sink:
                async for item in source:
                    await sink.send(item)
        finally:
            self._lost.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        import mcp_types as types

        server = self.server
        if isinstance(message, types.ToolListChangedNotification) and self._session is not None:
            log.info("%s: tool list changed, re-syncing", server.label)
            try:
                await server.sync(self._session)
            except Exception as exc:
                log.warning("%s: tool re-sync failed, keeping the previous tools: %s", server.label, _describe(exc))
        elif isinstance(message, Exception):
            log.warning("%s: transport error: %s", server.label, _describe(message))
            if self.config.transport == "streamable-http":
                self._lost.set()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        config = self.config
        if config.transport == "stdio":
            async with self._stdio() as streams:
                yield streams
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(30.0, read=max(300.0, config.toolCallTimeoutMs / 1000))
        async with (
            httpx2.AsyncClient(headers=dict(config.headers), timeout=timeout) as client,
            streamable_http_client(str(config.url), http_client=client) as (read, write),
        ):
            yield read, write

    @contextlib.asynccontextmanager
    async def _stdio(self) -> AsyncIterator[tuple[Any, Any]]:
        from mcp import StdioServerParameters, stdio_client

        config = self.config
        params = StdioServerParameters(
            command=str(config.command), args=list(config.args), env=server_environ(config.env), cwd=self.server.cwd
        )
        stderr = _StderrLog(self.server.label)
        self._stderr = stderr
        errlog = await stderr.open()
        try:
            async with stdio_client(params, errlog=errlog) as streams:
                errlog.close()
                yield streams
        finally:
            errlog.close()

    def release(self) -> None:
        """Close what the generation may still hold after its connection ended."""
        if self._stderr is not None:
            self._stderr.close()

    async def confirm_closed(self) -> bool:
        """Whether the generation's server process (and whatever inherited its stderr) is gone, within 5 s."""
        if self._stderr is None:
            return True
        return await self._stderr.wait_closed(CLOSE_CONFIRM_S)


class _StderrLog(asyncio.Protocol):
    """The server's stderr, forwarded line by line to the log at DEBUG; its end means every holder exited."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.buffer = b""
        self.eof = asyncio.get_running_loop().create_future()
        self.transport: asyncio.BaseTransport | None = None

    async def open(self) -> Any:
        """A pipe whose write end (returned, for the child) feeds this protocol."""
        read_fd, write_fd = os.pipe()
        loop = asyncio.get_running_loop()
        try:
            self.transport, _ = await loop.connect_read_pipe(lambda: self, os.fdopen(read_fd, "rb", buffering=0))
        except BaseException:
            os.close(write_fd)
            raise
        return os.fdopen(write_fd, "w")

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            self._emit(line)
        if len(self.buffer) > STDERR_LINE_LIMIT:
            self._emit(self.buffer)
            self.buffer = b""

    def connection_lost(self, exc: Exception | None) -> None:
        if self.buffer:
            self._emit(self.buffer)
            self.buffer = b""
        if not self.eof.done():
            self.eof.set_result(None)

    def _emit(self, line: bytes) -> None:
        log.debug("%s stderr: %s", self.label, line[:STDERR_LINE_LIMIT].decode(errors="replace").rstrip())

    def close(self) -> None:
        """Stop reading (a process that outlived its connection keeps the pipe open otherwise)."""
        if self.transport is not None:
            self.transport.close()

    async def wait_closed(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(asyncio.shield(self.eof), seconds)
        except TimeoutError:
            return False
        return True


def _leaf(exc: Exception) -> Exception:
    """The one failure inside (nested) single-member exception groups that task groups wrap it in."""
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "connection closed"
    parts = [str(exc) or type(exc).__name__]
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, BaseExceptionGroup):
        parts = [_describe(e) for e in exc.exceptions]
    elif cause is not None and str(cause) and str(cause) not in parts[0]:
        parts.append(str(cause))
    return ": ".join(parts)


# -- availability of the extra ------------------------------------------------------------------

_warned_missing = False


def mcp_available() -> bool:
    """Whether the optional ``mcp`` package can be imported (imports it)."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


def _warn_missing() -> None:
    global _warned_missing
    if not _warned_missing:
        _warned_missing = True
        log.warning(
            "mcp-client: MCP servers need the optional mcp package (%s); running without MCP tools", INSTALL_HINT
        )


# -- entry points -------------------------------------------------------------------------------


async def mount_servers(
    ctx: Context, servers: Sequence[McpServerConfig | Mapping[str, Any]], *, cwd: str | None = None
) -> Disposer:
    """Connect ``servers`` and register their tools and instructions in ``ctx``'s scope.

    Stable API for frontends that mount servers per session (the ACP bridge passes the agent's
    scope context and the session cwd, the default ``cwd`` of stdio servers). Every spec is
    validated before anything connects (:class:`McpConfigError`); a missing ``mcp`` package raises
    :class:`McpUnavailableError`; a server that fails its first attempt with ``failOnStartupError``
    unwinds the ones already mounted and raises. The returned disposer (``await disposer()``) closes
    them all, terminating their processes; it also runs when ``ctx``'s fiber unwinds.
    """
    configs = [parse_config(spec) for spec in servers]
    names = [c.serverName for c in configs]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise McpConfigError(f'mcp server config: serverName "{duplicate}" is listed twice')
    if configs and not mcp_available():
        raise McpUnavailableError(f"MCP servers need the optional mcp package: {INSTALL_HINT}")
    mounted: list[McpServer] = []

    async def unmount() -> None:
        errors: list[Exception] = []
        for server in reversed(mounted):
            try:
                await server.close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise ExceptionGroup("closing MCP servers failed", errors)

    disposer = ctx.register(unmount)
    try:
        for config in configs:
            server = McpServer(ctx, config, cwd=cwd)
            mounted.append(server)
            await server.start()
    except BaseException:
        await disposer()
        raise
    return disposer


# -- the mcp-servers row ------------------------------------------------------------------------


class ServersFileConfig(BaseModel):
    """The ``mcp-servers`` row: ``$DSH_HOME/mcp.json``, and the project's ``.mcp.json`` only when asked
    (its commands come with whatever repository is checked out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    includeProject: bool = False


def servers_from_file(path: str) -> list[McpServerConfig]:
    """The servers an ``{"mcpServers": {...}}`` file declares; a bad file raises naming it and the entry."""
    import json

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
