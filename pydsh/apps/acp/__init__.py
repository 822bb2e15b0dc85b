"""``pydsh acp``: editors such as Zed drive pydsh agents over the Agent Client Protocol (spec 11 Part A).

The ``acp`` row takes fd 1 for protocol frames when it activates (``sys.stdout`` and fd 1 itself
then point at stderr, so no stray print reaches the editor) and provides the ``app`` service,
which serves newline-delimited JSON-RPC on stdio until end of input, then closes every session
and exits 0. The ``agent-client-protocol`` package is an optional extra, imported here only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pydsh.kernel.context import Context

if TYPE_CHECKING:
    from pydsh.apps.acp_bridge import Bridge, Selection

INSTALL_HINT = (
    "pydsh acp: the ACP bridge needs the agent-client-protocol package, "
    "which is not installed; install it with: pip install 'pydsh[acp]'"
)
USAGE = "pydsh acp [--patch <path>]... [--provider P --model M]"
HELP = f"""\
Usage: {USAGE}

Serve an editor (Zed and other Agent Client Protocol clients) over stdio.
The editor starts this command and speaks JSON-RPC on its stdin and stdout.

Options:
  --provider P --model M   the model route of new sessions (default: the profile's)
  -h, --help               show this help
"""
READ_CHUNK = 1 << 16
LINE_LIMIT = 50 * 1024 * 1024
"""The ACP library's default stdio buffer limit, kept (spec 11 §A.1)."""


class Config(BaseModel):
    """``acp`` row config (spec 11 §A.1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str | None = None
    model: str | None = None
    sessionListPageSize: int = Field(default=100, ge=1)

    @model_validator(mode="after")
    def _route_pair(self) -> Config:
        if bool(self.provider) != bool(self.model):
            raise ValueError("give provider and model together")
        return self


class _UsageError(Exception):
    """A command-line problem: printed as is, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise _UsageError(f"error: {message}")


def parse_args(args: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="pydsh acp", usage=USAGE, add_help=False)
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("--provider")
    parser.add_argument("--model")
    ns = parser.parse_args(args)
    if bool(ns.provider) != bool(ns.model):
        raise _UsageError("error: give --provider and --model together")
    return ns


class MissingExtra:
    """The ``app`` when the ``acp`` extra is not installed: one line naming the install command, exit 2."""

    async def run(self, args: list[str]) -> int:
        print(INSTALL_HINT, file=sys.stderr)
        return 2


class _Pipe(asyncio.Protocol):
    """Write side of the frame pipe: back-pressure and the client going away."""

    def __init__(self) -> None:
        self.writable = asyncio.Event()
        self.writable.set()
        self.lost = False

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.writable.set()


class FrameOutput:
    """The frame descriptor: a pipe through the event loop, or blocking writes to a regular file."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._transport: asyncio.WriteTransport | None = None
        self._pipe = _Pipe()

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._transport, _ = await loop.connect_write_pipe(lambda: self._pipe, self._file)
        except ValueError:
            return

    async def write(self, data: bytes) -> None:
        if self._pipe.lost or (self._transport is not None and self._transport.is_closing()):
            raise ConnectionError("the ACP client closed the connection")
        if self._transport is None:
            self._file.write(data)
            self._file.flush()
            return
        self._transport.write(data)
        await self._pipe.writable.wait()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        else:
            self._file.close()


def _feed_stdin(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    """Blocking reads of fd 0 handed to the loop (works for pipes, terminals and files alike)."""
    while True:
        try:
            chunk = os.read(0, READ_CHUNK)
        except OSError:
            chunk = b""
        try:
            if not chunk:
                loop.call_soon_threadsafe(reader.feed_eof)
                return
            loop.call_soon_threadsafe(reader.feed_data, chunk)
        except RuntimeError:
            return


class StdioTransport:
    """The library's message transport over our stdio: malformed frames are answered, never fatal."""

    def __init__(self, reader: asyncio.StreamReader, out: FrameOutput) -> None:
        self._reader = reader
        self._out = out
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        async with self._lock:
            await self._out.write(data.encode("utf-8", "surrogatepass"))

    async def receive(self) -> dict[str, Any] | None:
        """The next routable message; ``None`` at end of input."""
        from pydsh.apps.acp_wire import error_frame, frame_problem

        while True:
            line = await self._line()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                await self._answer(error_frame(None, -32700, "Parse error", f"the frame is not valid JSON: {exc}"))
                continue
            problem = frame_problem(message)
            if problem is None:
                return cast("dict[str, Any]", message)
            answer, rid, detail = problem
            if answer:
                await self._answer(error_frame(rid, -32600, f"Invalid request: {detail}", detail))
            else:
                print(f"pydsh acp: ignored a malformed notification: {detail}", file=sys.stderr)

    async def _answer(self, frame: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError):
            await self.send(frame)

    async def _line(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            try:
                chunks.append(await self._reader.readuntil(b"\n"))
                return b"".join(chunks)
            except asyncio.LimitOverrunError as exc:
                chunks.append(await self._reader.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:
                chunks.append(exc.partial)
                return b"".join(chunks)

    async def close(self) -> None:
        self._out.close()


class AcpApp:
    """The ``app`` service of ``pydsh acp``."""

    def __init__(self, ctx: Context, config: Config, frame_fd: int) -> None:
        self.ctx = ctx
        self.config = config
        self.frame_fd = frame_fd

    def _default(self, ns: argparse.Namespace) -> Selection | None:
        """The route of new sessions: the command line, the row config, else the default route."""
        from pydsh.apps.acp_bridge import Selection

        if ns.provider:
            return Selection(ns.provider, ns.model)
        if self.config.provider and self.config.model:
            return Selection(self.config.provider, self.config.model)
        default = self.ctx.get("agent_default_model")
        if default is None:
            return None
        route = default.current_selection()
        return Selection(route["provider"], route["model"])

    async def run(self, args: list[str]) -> int:
        try:
            ns = parse_args(args)
        except _UsageError as exc:
            print(f"{exc}\nusage: {USAGE}", file=sys.stderr)
            return 2
        out = os.fdopen(self.frame_fd, "wb", buffering=0)
        if ns.help:
            out.write(HELP.encode())
            out.close()
            return 0
        from pydsh.apps.acp_bridge import Bridge

        bridge = Bridge(self.ctx, self.config.sessionListPageSize, self._default(ns))
        frames = FrameOutput(out)
        await frames.open()
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        loop = asyncio.get_running_loop()
        threading.Thread(target=_feed_stdin, args=(loop, reader), name="pydsh-acp-stdin", daemon=True).start()
        return await self._serve(bridge, StdioTransport(reader, frames))

    async def _serve(self, bridge: Bridge, transport: StdioTransport) -> int:
        """Serve until end of input or SIGTERM/SIGINT, then close every session (exit 0)."""
        import acp

        loop = asyncio.get_running_loop()
        serving = asyncio.ensure_future(acp.run_agent(cast("acp.Agent", bridge), transport, use_unstable_protocol=True))
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, serving.cancel)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            for failure in await bridge.dispose():
                print(f"pydsh acp: closing {failure}", file=sys.stderr)
        return 0


def _take_stdout(ctx: Context) -> int:
    """A private copy of fd 1 for frames; fd 1 and ``sys.stdout`` then write to stderr."""
    frame_fd = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    saved = sys.stdout
    sys.stdout = sys.stderr

    def restore() -> None:
        sys.stdout = saved

    ctx.register(restore)
    return frame_fd


name = "acp"
inject = ("agents", "sessions", "llm")


def apply(ctx: Context, config: Config) -> None:
    """Import the ACP library (the optional extra), take stdout for frames, provide the ``app``."""
    try:
        import acp  # noqa: F401
    except ImportError:
        ctx.provide("app", MissingExtra())
        return
    ctx.provide("app", AcpApp(ctx, config, _take_stdout(ctx)))
