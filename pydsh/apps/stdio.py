"""Stdio for the frontends that speak JSON-RPC on it (the SDK server and ``pydsh acp``): one way to take
fd 1 for frames, read stdin, write frames with back-pressure and pace model streams by the reader.

Frames leave through one :class:`FrameWriter` (one ``write`` per frame, in call order); sends never wait
for the client, so a client that stops reading cannot hang a response or a teardown. Instead, every
model stream of the process starts, and pulls each chunk, only while the client keeps up
(:func:`pace_model_streams`), so a slow reader slows the turns down rather than growing the process.

Requests jump the queue: a chunk read from stdin, the task reading it and the tasks serving its requests
run before the callbacks already waiting (:func:`call_first_threadsafe`, :func:`hurry`), so a process
stepping hundreds of sessions still answers a cheap request within one callback's time, not after every
session's pending step (decision 0025).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
import threading
import weakref
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
PIPE_SIZE = 1 << 20
"""Bytes the frame pipe holds (Linux; 64 KiB by default): the loop writes at most this much per turn of a
busy loop, so a small pipe let frames back up behind hundreds of stepping sessions."""


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


def widen_pipe(fd: int) -> None:
    """Ask for a PIPE_SIZE pipe buffer where the system allows it (a no-op elsewhere, or past the limit)."""
    import fcntl

    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)


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
        widen_pipe(self._file.fileno())

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
    client wrote early wait in the pipe rather than being lost. A chunk and the task reading it run ahead
    of the callbacks already waiting."""

    def __init__(self) -> None:
        self._inbound: asyncio.Queue[bytes] = asyncio.Queue()
        self._slots = threading.Semaphore(READ_AHEAD_CHUNKS)
        self._reader: asyncio.Task[Any] | None = None
        self._read: collections.deque[bytes] = collections.deque()
        """Chunks the thread read, in order, not handed to the queue yet (a later delivery takes them all)."""
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._read_stdin, args=(loop,), name="pydsh-stdin", daemon=True).start()

    async def read(self) -> bytes:
        """The next chunk of stdin (``b""`` at end of input)."""
        self._reader = asyncio.current_task()
        try:
            chunk = await self._inbound.get()
        finally:
            self._reader = None
        self._slots.release()
        return chunk

    def _deliver(self) -> None:
        """On the loop: queue the chunks read so far, in order, and let the task waiting for them run next."""
        while self._read:
            self._inbound.put_nowait(self._read.popleft())
        if self._reader is not None:
            hurry(self._reader)

    def _read_stdin(self, loop: asyncio.AbstractEventLoop) -> None:
        """Blocking reads of fd 0 handed to the loop, each after a free read-ahead slot; ``b""`` marks end of input."""
        while True:
            self._slots.acquire()
            try:
                chunk = os.read(0, READ_CHUNK)
            except OSError:
                chunk = b""
            self._read.append(chunk)
            try:
                call_first_threadsafe(loop, self._deliver)
            except RuntimeError:
                return
            if not chunk:
                return


def _ready_callbacks(loop: asyncio.AbstractEventLoop) -> collections.deque[asyncio.Handle] | None:
    """The loop's queue of callbacks ready to run, where asyncio's own loops keep it (not public API: other
    loops get ``None`` and plain FIFO scheduling)."""
    ready = getattr(loop, "_ready", None)
    return ready if isinstance(ready, collections.deque) else None


def _wake() -> None:
    """Nothing: scheduled from another thread only to wake a loop waiting in ``select``."""


_JUMPED: weakref.WeakSet[asyncio.Handle] = weakref.WeakSet()
"""Handles put ahead by :func:`call_first_threadsafe` or :func:`hurry`; a later hurry queues behind those still
waiting, so requests keep the order they arrived in across chunks (same-session prompts are admitted in
arrival order, spec 06)."""


def call_first_threadsafe(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    """``loop.call_soon_threadsafe(callback, *args)``, but run before the callbacks already waiting (right after
    the one running), and so before one scheduled this way earlier: ``callback`` must not depend on that order.
    ``RuntimeError`` once the loop is closed, as ``call_soon_threadsafe``."""
    ready = _ready_callbacks(loop)
    if ready is None or loop.is_closed():
        loop.call_soon_threadsafe(callback, *args)
        return
    handle = asyncio.Handle(callback, args, loop)
    _JUMPED.add(handle)
    ready.appendleft(handle)
    loop.call_soon_threadsafe(_wake)


def hurry(*tasks: asyncio.Task[Any]) -> None:
    """Move the tasks' next steps ahead of the callbacks already waiting, keeping their order and queueing
    behind what jumped before them, when they are the newest ones scheduled, in this order (right after the
    tasks were created or woken); else leave the order alone."""
    ready = _ready_callbacks(tasks[0].get_loop()) if tasks else None
    if ready is None:
        return
    moved: list[asyncio.Handle] = []
    for task in reversed(tasks):
        if not ready or _task_of(ready[-1]) is not task:
            ready.extend(reversed(moved))  # not the newest (another thread scheduled one): put back
            return
        moved.append(ready.pop())
    at = 0
    while at < len(ready) and ready[at] in _JUMPED:  # a handle is always hashable: nothing here raises
        at += 1
    for handle in moved:  # newest first, each inserted before the one after it
        _JUMPED.add(handle)
        ready.insert(at, handle)


def _task_of(handle: asyncio.Handle) -> object:
    """The task whose step or wake-up ``handle`` runs (``None`` for other callbacks)."""
    return getattr(getattr(handle, "_callback", None), "__self__", None)


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
