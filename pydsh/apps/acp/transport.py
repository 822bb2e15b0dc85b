"""The ACP library's message transport over pydsh's stdio: bounded lines and nesting, malformed frames
answered (``-32700``/``-32600``) and never fatal, frames out through the one non-blocking writer.

Notifications are sorted here too: ``$/cancel_request`` for a prompt in flight cancels that prompt (as
``session/cancel`` would), and a notification no one handles is dropped with one line per method, as
JSON-RPC asks, instead of reaching the library as an error with a traceback."""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable
from typing import Any, cast

from pydsh.apps.acp.wire import error_frame, frame_problem
from pydsh.apps.stdio import FrameWriter, StdinReader
from pydsh.wire.framing import FrameError, LineSplitter, parse_frame

LINE_LIMIT = 50 * 1024 * 1024
"""The ACP library's default stdio buffer limit, kept (spec 11 §A.1): a longer line is discarded."""
HANDLED_NOTIFICATIONS = frozenset({"session/cancel"})
CANCEL_REQUEST = "$/cancel_request"


class StdioTransport:
    """What ``acp.run_agent`` reads messages from and writes them to."""

    def __init__(self, stdin: StdinReader, out: FrameWriter, cancel_prompt: Callable[[str], None]) -> None:
        self._stdin = stdin
        self._out = out
        self._cancel_prompt = cancel_prompt
        self._splitter = LineSplitter(_warn_long_line, LINE_LIMIT)
        self._lines: collections.deque[bytes] = collections.deque()
        self._ended = False
        self._prompts: dict[object, str] = {}
        """JSON-RPC id → session id of each ``session/prompt`` not answered yet."""
        self._ignored: set[str] = set()

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame; it never waits for the client (a client that stops reading cannot hang us)."""
        if "method" not in message:
            self._prompts.pop(message.get("id"), None)
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
            if problem is None and self._routable(message):
                return cast("dict[str, Any]", message)
            if problem is None:
                continue
            answer, rid, detail = problem
            if answer:
                self._answer(error_frame(rid, -32600, f"Invalid request: {detail}", detail))
            else:
                print(f"pydsh acp: ignored a malformed notification: {detail}", file=sys.stderr)

    def _answer(self, frame: dict[str, Any]) -> None:
        self._out.send(frame)

    def _routable(self, message: dict[str, Any]) -> bool:
        """Whether the library should see ``message``: requests and responses, and the notifications it
        handles; a prompt is remembered until answered, a cancellation of one is carried out here."""
        method = message.get("method")
        if method is None:
            return True
        params = message.get("params") or {}
        if "id" in message:
            if method == "session/prompt" and isinstance(params.get("sessionId"), str):
                self._prompts[message["id"]] = params["sessionId"]
            return True
        if method == CANCEL_REQUEST:
            session_id = self._prompts.get(params.get("requestId"))
            if session_id is not None:
                self._cancel_prompt(session_id)
            return False
        if method in HANDLED_NOTIFICATIONS and isinstance(params.get("sessionId"), str):
            return True
        if method.startswith("_"):
            return True
        if method not in self._ignored:
            self._ignored.add(method)
            print(f"pydsh acp: ignored the notification {method!r}, which this agent does not handle", file=sys.stderr)
        return False

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
