"""One connection attempt of an MCP server (a *generation*): transport, session, ``initialize``, sync, serve.

Split from :mod:`pydsh.tools.mcp`, which owns the server's lifecycle, tools and calls; this module owns
what lives and dies with one connection: the transport (stdio, streamable HTTP or legacy SSE), the relay
whose end is the connection's end, the server's stderr and the graceful or forced end of it all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.client.session import IncomingMessage

    from pydsh.tools.mcp import McpServer

log = logging.getLogger("pydsh.tools.mcp")

CLOSE_CONFIRM_S = 5.0
"""How long a closed generation's server process (and what inherited its stderr) may take to go."""
STDERR_LINE_LIMIT = 4096


class Generation:
    """One connection attempt: transport, session, initialize, sync, then serve until it drops."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.config = server.config
        self.connected_at: float | None = None
        self.ended_at: float | None = None
        self._scope: Any = None
        self._cancelled = False
        self._lost: asyncio.Event = asyncio.Event()
        self._stderr: StderrLog | None = None
        self._session: ClientSession | None = None

    @property
    def lost(self) -> bool:
        """Whether the connection ended (or is being ended)."""
        return self._lost.is_set()

    def cancel(self) -> None:
        """Abandon this generation from another task at once (closing the server)."""
        self._cancelled = True
        self._lost.set()
        if self._scope is not None:
            self._scope.cancel()

    def stop(self) -> None:
        """End this generation from another task: a connected one leaves its transport normally (an HTTP
        session gets its ``DELETE``), one still connecting is cancelled."""
        if self.connected_at is None:
            self.cancel()
            return
        self._cancelled = True
        self._lost.set()

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
                    read_timeout_seconds=self.config.requestTimeoutMs / 1000,
                    client_info=Implementation(name="pydsh-mcp-client", version=__version__),
                    message_handler=self._on_message,
                )
            )
            self._session = session
            init = await session.initialize()
            instructions = (init.instructions or "").rstrip()
            limit = self.config.maxInstructionBytes
            if len(instructions.encode("utf-8", "surrogatepass")) > limit:
                raise RuntimeError(f"{server.label}: server instructions exceed maxInstructionBytes ({limit})")
            await server.sync_prompts(session)
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

        from pydsh.tools.mcp_limits import Refusal

        server = self.server
        if isinstance(message, types.ToolListChangedNotification) and self._session is not None:
            log.info("%s: tool list changed, re-syncing", server.label)
            try:
                await server.sync(self._session)
            except Exception as exc:
                log.warning("%s: tool re-sync failed, keeping the previous tools: %s", server.label, describe(exc))
        elif isinstance(message, Refusal):
            log.warning("%s: transport error: the server %s", server.label, message.text)
        elif isinstance(message, Exception):
            log.warning("%s: transport error: %s", server.label, describe(message))
            if self.config.transport == "streamable-http":
                self._lost.set()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        config = self.config
        if config.transport == "stdio":
            async with self._stdio() as streams:
                yield streams
            return
        from pydsh.tools.mcp_http import http_transport

        read_timeout = max(300.0, config.toolCallTimeoutMs / 1000)
        async with http_transport(
            config.transport,
            str(config.url),
            config.headers,
            read_timeout_s=read_timeout,
            bounds=self.server.bounds(),
            label=self.server.label,
        ) as streams:
            yield streams

    @contextlib.asynccontextmanager
    async def _stdio(self) -> AsyncIterator[tuple[Any, Any]]:
        from pydsh.tools.mcp_config import server_environ
        from pydsh.tools.mcp_stdio import stdio_transport

        config = self.config
        stderr = StderrLog(self.server.label)
        self._stderr = stderr
        errlog = await stderr.open()
        try:
            async with stdio_transport(
                str(config.command),
                list(config.args),
                env=server_environ(config.env),
                cwd=self.server.cwd,
                errlog=errlog,
                bounds=self.server.bounds(),
            ) as streams:
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


class StderrLog(asyncio.Protocol):
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


def describe(exc: BaseException | None) -> str:
    """An exception as one readable line, with its cause when that adds something."""
    if exc is None:
        return "connection closed"
    parts = [str(exc) or type(exc).__name__]
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, BaseExceptionGroup):
        parts = [describe(e) for e in exc.exceptions]
    elif cause is not None and str(cause) and str(cause) not in parts[0]:
        parts.append(str(cause))
    return ": ".join(parts)
