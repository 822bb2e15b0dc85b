"""The ACP library's message transport over pydsh's stdio: bounded lines and nesting, malformed frames
answered (``-32700``/``-32600``) and never fatal, frames out through the one non-blocking writer."""

from __future__ import annotations

import collections
import sys
from typing import Any, cast

from pydsh.apps.acp.wire import error_frame, frame_problem
from pydsh.apps.stdio import FrameWriter, StdinReader
from pydsh.sdk.framing import FrameError, LineSplitter, parse_frame

LINE_LIMIT = 50 * 1024 * 1024
"""The ACP library's default stdio buffer limit, kept (spec 11 §A.1): a longer line is discarded."""


class StdioTransport:
    """What ``acp.run_agent`` reads messages from and writes them to."""

    def __init__(self, stdin: StdinReader, out: FrameWriter) -> None:
        self._stdin = stdin
        self._out = out
        self._splitter = LineSplitter(_warn_long_line, LINE_LIMIT)
        self._lines: collections.deque[bytes] = collections.deque()
        self._ended = False

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame; it never waits for the client (a client that stops reading cannot hang us)."""
        self._out.send(message)

    async def receive(self) -> dict[str, Any] | None:
        """The next routable message; ``None`` at end of input."""
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = parse_frame(line)
            except FrameError as exc:
                self._answer(error_frame(None, -32700, "Parse error", str(exc)))
                continue
            problem = frame_problem(message)
            if problem is None:
                return cast("dict[str, Any]", message)
            answer, rid, detail = problem
            if answer:
                self._answer(error_frame(rid, -32600, f"Invalid request: {detail}", detail))
            else:
                print(f"pydsh acp: ignored a malformed notification: {detail}", file=sys.stderr)

    def _answer(self, frame: dict[str, Any]) -> None:
        self._out.send(frame)

    async def _line(self) -> bytes | None:
        """The next complete line (an unterminated last one at end of input); ``None`` after the end."""
        while not self._lines:
            if self._ended:
                return None
            chunk = await self._stdin.read()
            if chunk:
                self._lines.extend(self._splitter.feed(chunk))
            else:
                self._ended = True
                self._lines.extend(self._splitter.finish())
        return self._lines.popleft()

    async def close(self) -> None:
        self._out.close()


def _warn_long_line(limit: int) -> None:
    print(f"pydsh acp: discarded an inbound line longer than {limit} bytes", file=sys.stderr, flush=True)
