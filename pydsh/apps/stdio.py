"""Stdio for the frontends that speak JSON-RPC on it (the SDK server and ``pydsh acp``): one way to take
fd 1 for frames, read stdin, write frames with back-pressure and pace model streams by the reader.

Frames leave through one :class:`FrameWriter` (one ``write`` per frame, in call order); sends never wait
for the client, so a client that stops reading cannot hang a response or a teardown. Instead, every
model stream of the process starts, and pulls each chunk, only while the client keeps up
(:func:`pace_model_streams`), so a slow reader slows the turns down rather than growing the process.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydsh.llm.hooks import LLM_STREAM
from pydsh.wire.framing import encode_frame

if TYPE_CHECKING:
    from pydsh.kernel.context import Context
    from pydsh.kernel.events import Next
    from pydsh.kernel.fiber import Disposer
    from pydsh.llm.types import StreamChunk

READ_CHUNK = 1 << 16
READ_AHEAD_CHUNKS = 16
OUTBOUND_HIGH_WATER = 1 << 20
OUTBOUND_LOW_WATER = 1 << 18


def take_stdout() -> tuple[int, Callable[[], None]]:
    """A private copy of fd 1 for frames; fd 1 and ``sys.stdout`` then write to stderr, and text a plugin
    left buffered in ``sys.stdout`` is flushed there too (never into the frames). Returns the frame
    descriptor and the function that gives ``sys.stdout`` back."""
    frame_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout.flush()
    saved = sys.stdout
    sys.stdout = sys.stderr

    def restore() -> None:
        sys.stdout = saved

    return frame_fd, restore


async def frame_writer(ctx: Context, on_lost: Callable[[], None]) -> FrameWriter:
    """Take fd 1 for frames (:func:`take_stdout`) and open the one writer of it; both are released when
    ``ctx``'s plugin unloads. ``on_lost`` runs once if the client stops reading."""
    frame_fd, restore = take_stdout()
    writer = FrameWriter(frame_fd, on_lost)

    def release() -> None:
        writer.close()
        restore()

    ctx.register(release)
    await writer.open()
    return writer


class _PipeProtocol(asyncio.Protocol):
    """Write-side protocol of the frame pipe: tracks the buffer draining and the reader going away."""

    def __init__(self, on_lost: Callable[[], None]) -> None:
        self.drained = asyncio.Event()
        self.drained.set()
        self._on_lost = on_lost

    def pause_writing(self) -> None:
        self.drained.clear()

    def resume_writing(self) -> None:
        self.drained.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.drained.set()
        self._on_lost()


class FrameWriter:
    """The single writer of the frame descriptor: one write per frame, in call order; sealed after the last."""

    def __init__(self, fd: int, on_lost: Callable[[], None]) -> None:
        self._file = os.fdopen(fd, "wb", buffering=0)
        self._on_lost = on_lost
        self._transport: asyncio.WriteTransport | None = None
        self._protocol: _PipeProtocol | None = None
        self.sealed = False
        self.broken = False
        self._closed = False

    async def open(self) -> None:
        """Drive a pipe or socket through the event loop; a regular file takes blocking writes."""
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.connect_write_pipe(lambda: _PipeProtocol(self._lost), self._file)
        except ValueError:
            return
        transport.set_write_buffer_limits(high=OUTBOUND_HIGH_WATER, low=OUTBOUND_LOW_WATER)
        self._transport, self._protocol = transport, protocol

    def _lost(self) -> None:
        if not (self.broken or self._closed):
            self.broken = True
            self._on_lost()

    def write(self, data: bytes) -> None:
        """Write raw bytes (nothing after the seal or once the reader is gone)."""
        if self.sealed or self.broken:
            return
        if self._transport is not None:
            if self._transport.is_closing():
                self._lost()
                return
            self._transport.write(data)
            return
        view = memoryview(data)
        try:
            while view:
                view = view[self._file.write(view) or 0 :]
        except OSError:
            self._lost()

    def send(self, frame: dict[str, Any]) -> None:
        """Encode and write one frame (``ValueError`` for a value JSON cannot carry)."""
        if not (self.sealed or self.broken):
            self.write(encode_frame(frame))

    def seal(self) -> None:
        """Nothing is written after this (the last response was written)."""
        self.sealed = True

    async def writable(self) -> None:
        """Wait while more than the high-water mark of frames is unread by the client (back-pressure)."""
        if self._protocol is not None and not (self.sealed or self.broken):
            await self._protocol.drained.wait()

    async def flush(self) -> None:
        """Wait until every written byte has left the process."""
        if self._transport is not None and self._protocol is not None and not self.broken:
            self._transport.set_write_buffer_limits(high=0)
            await self._protocol.drained.wait()

    def close(self) -> None:
        """Release the frame descriptor (the pipe transport closes it once its buffer is written)."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()
        else:
            self._file.close()


class StdinReader:
    """Blocking reads of fd 0 on a thread, handed to the loop at most a few chunks ahead of the consumer
    (works for pipes, terminals and files alike); started when the frontend's row activates, so bytes a
    client wrote early wait in the pipe rather than being lost."""

    def __init__(self) -> None:
        self._inbound: asyncio.Queue[bytes] = asyncio.Queue()
        self._slots = threading.Semaphore(READ_AHEAD_CHUNKS)
        loop = asyncio.get_running_loop()
        args = (loop, self._inbound, self._slots)
        threading.Thread(target=_read_stdin, args=args, name="pydsh-stdin", daemon=True).start()

    async def read(self) -> bytes:
        """The next chunk of stdin (``b""`` at end of input)."""
        chunk = await self._inbound.get()
        self._slots.release()
        return chunk


def _read_stdin(loop: asyncio.AbstractEventLoop, inbound: asyncio.Queue[bytes], slots: threading.Semaphore) -> None:
    """Blocking reads of fd 0 handed to the loop, each after a free read-ahead slot; ``b""`` marks end of input."""
    while True:
        slots.acquire()
        try:
            chunk = os.read(0, READ_CHUNK)
        except OSError:
            chunk = b""
        try:
            loop.call_soon_threadsafe(inbound.put_nowait, chunk)
        except RuntimeError:
            return
        if not chunk:
            return


def pace_model_streams(ctx: Context, writer: FrameWriter) -> Disposer:
    """Make every model call of the process start, and pull each chunk, only while ``writer``'s client keeps up."""

    async def pace(
        options: dict[str, Any], nxt: Next[AsyncIterator[StreamChunk] | None]
    ) -> AsyncIterator[StreamChunk] | None:
        await writer.writable()
        source = await nxt()
        return None if source is None else _paced(source, writer.writable)

    return ctx.on(LLM_STREAM, pace, name="stream-pacing")


async def _paced(source: AsyncIterator[Any], ready: Callable[[], Awaitable[None]]) -> AsyncIterator[Any]:
    """``source`` chunk by chunk, the next one pulled only once ``ready`` returns."""
    try:
        async for chunk in source:
            yield chunk
            await ready()
    finally:
        closer = getattr(source, "aclose", None)
        if closer is not None:
            await closer()
