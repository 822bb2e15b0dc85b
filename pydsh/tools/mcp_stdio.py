"""The stdio transport of the MCP client: the server as a child process speaking JSON, one message a line.

pydsh's own rather than the ``mcp`` package's ``stdio_client``, which joins a long line chunk by chunk
(quadratic: a 30 MB result took seconds to minutes) and passes a line it cannot parse on as a stray
error, so the request that line answered waited for its timeout. Here a line is read in linear time,
at most ``maxMessageBytes`` of it is held, a large one is walked item by
item (:func:`~pydsh.tools.mcp_limits.bound_message`), and a line the client cannot accept answers its
request with the reason. Shutdown is the package's and the MCP specification's: close stdin, wait,
then SIGTERM and SIGKILL to the server's process group.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, TextIO

from pydsh.tools.mcp_limits import (
    EDGE_BYTES,
    LARGE_MESSAGE_BYTES,
    Bounds,
    Refusal,
    bound_message,
    diagnose,
    locate,
    oversized,
)

log = logging.getLogger("pydsh.tools.mcp")

EXIT_GRACE_S = 2.0
"""How long the server may take to exit after its stdin closes, and after SIGTERM, before the next step."""
FLUSH_S = 0.5
"""How long messages already accepted may take to reach the server's stdin at shutdown."""


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str, args: list[str], *, env: Mapping[str, str], cwd: str, errlog: TextIO, bounds: Bounds
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server in its own process group and yield ``(read, write)`` streams of ``SessionMessage``."""
    import anyio
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        [command, *args], env=dict(env), stderr=errlog, cwd=cwd or None, start_new_session=True
    )
    read_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    wire = _Wire(process, read_send, bounds)
    flushed = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(wire.read)
        group.start_soon(wire.write, write_receive, flushed)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(FLUSH_S):
                    await flushed.wait()
                await _stop(process)
                for stream in (read_send, write_receive):
                    await stream.aclose()
            group.cancel_scope.cancel()


class _Wire:
    """The two pipes: JSON lines out of ``SessionMessage`` s, and lines in, bounded, as messages or refusals."""

    def __init__(self, process: Any, sink: Any, bounds: Bounds) -> None:
        self.process = process
        self.sink = sink
        self.bounds = bounds
        self.pending: set[str] = set()
        """Ids (as text) of requests sent and not yet answered."""

    async def write(self, source: Any, flushed: Any) -> None:
        """Send each message as one line; a broken pipe ends the read side too, so no request waits on it."""
        import anyio
        import mcp_types as types

        try:
            async with source:
                async for item in source:
                    message = item.message
                    if isinstance(message, types.JSONRPCRequest):
                        self.pending.add(str(message.id))
                    line = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await self.process.stdin.send(line.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await self.sink.aclose()
        finally:
            flushed.set()

    async def read(self) -> None:
        """Split stdout into lines in linear time; a line past the limit is counted, never held."""
        import anyio

        buffer = bytearray()
        scan = 0
        skipped: _Skipped | None = None
        try:
            async with self.sink:
                async for chunk in self.process.stdout:
                    data = chunk
                    if skipped is not None:
                        rest = skipped.feed(data)
                        if rest is None:
                            continue
                        await self.deliver(skipped.refusal())
                        skipped, data = None, rest
                    buffer += data
                    start = 0
                    while (newline := buffer.find(b"\n", scan)) >= 0:
                        await self.deliver(self.take(buffer, start, newline))
                        start = scan = newline + 1
                    del buffer[:start]
                    scan = len(buffer)
                    if len(buffer) > self.bounds.max_message_bytes:
                        skipped = _Skipped(buffer, self.bounds.max_message_bytes)
                        buffer, scan = bytearray(), 0
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        await self.drain()

    async def drain(self) -> None:
        """Discard what the server still writes, so one blocked on a full pipe can exit."""
        import anyio

        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            while True:
                await self.process.stdout.receive()

    def take(self, buffer: bytearray, start: int, end: int) -> bytes | str | Refusal:
        """The line ``buffer[start:end]``, copied once: bytes when small, text (decoded straight from the
        buffer) when large, a refusal when past the limit or not UTF-8."""
        size, limit = end - start, self.bounds.max_message_bytes
        with memoryview(buffer) as view:
            if size > limit:
                edge = min(EDGE_BYTES, size)
                return locate(oversized(size, limit), bytes(view[start : start + edge]), bytes(view[end - edge : end]))
            if size < LARGE_MESSAGE_BYTES:
                return bytes(view[start:end])
            try:
                return str(view[start:end], "utf-8")
            except UnicodeDecodeError:
                return diagnose(bytes(view[start:end]))

    async def deliver(self, line: bytes | str | Refusal) -> None:
        """Pass one line on as a message, or answer the request it belongs to with why it was refused."""
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        try:
            message = None if isinstance(line, Refusal) else self.parse(line)
        except Refusal as refusal:
            line = refusal
        if isinstance(line, Refusal):
            if not line.response or str(line.message_id) not in self.pending:
                await self.sink.send(line)
                return
            message = types.JSONRPCError(
                jsonrpc="2.0", id=line.message_id, error=types.ErrorData.model_validate(line.error_data())
            )
        if message is None:
            return
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            self.pending.discard(str(message.id))
        await self.sink.send(SessionMessage(message))

    def parse(self, line: bytes | str) -> Any:
        """One line (bytes when small, text when large) as a JSON-RPC message, ``None`` when blank; raises
        :class:`Refusal` saying what is wrong with it."""
        import mcp_types as types

        if isinstance(line, bytes):
            if not line.strip():
                return None
            try:
                return types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                raise diagnose(line) from None
        bounded = bound_message(line, self.bounds)
        try:
            return types.jsonrpc_message_adapter.validate_python(bounded, by_name=False)
        except ValueError:
            raise Refusal(
                "returned a message that is not valid JSON-RPC",
                message_id=bounded.get("id"),
                response=True if "result" in bounded or "error" in bounded else None,
            ) from None


class _Skipped:
    """A line past the message limit: only its length and first and last bytes are kept (they name its request)."""

    def __init__(self, start: bytearray, limit: int) -> None:
        self.limit = limit
        self.head = bytes(start[:EDGE_BYTES])
        self.tail = bytes(start[-EDGE_BYTES:])
        self.size = len(start)

    def feed(self, chunk: bytes) -> bytes | None:
        """Count ``chunk``; once the line ends, what follows it (else ``None``)."""
        newline = chunk.find(b"\n")
        part = chunk if newline < 0 else chunk[:newline]
        self.size += len(part)
        self.tail = (self.tail + part)[-EDGE_BYTES:]
        return None if newline < 0 else chunk[newline + 1 :]

    def refusal(self) -> Refusal:
        """Why the line was refused, with the request id its ends show."""
        return locate(oversized(self.size, self.limit), self.head, self.tail)


async def _stop(process: Any) -> None:
    """Close stdin, give the server time to exit, then end its whole process group."""
    import anyio
    from mcp.os.posix.utilities import terminate_posix_process_tree

    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, EXIT_GRACE_S):
        await terminate_posix_process_tree(process, EXIT_GRACE_S)
        if not await _exited(process, EXIT_GRACE_S):
            log.warning("MCP server process %d is still alive after SIGKILL; abandoning it", process.pid)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    if transport is not None:
        with contextlib.suppress(PermissionError):
            transport.close()


async def _exited(process: Any, seconds: float) -> bool:
    """Whether the process exited within ``seconds`` (polled: ``wait`` also waits for its pipes to close)."""
    import anyio

    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None
