"""Limits of ``pydsh web`` against slow clients and floods, and the refusals and log lines they give.

uvicorn bounds the header size (h11's 16 KiB) and the idle time between requests (``timeout_keep_alive``)
but has no deadline for receiving a request, no connection cap that frees sockets, and lets asyncio log
every failed ``accept()``. This module holds the stdlib half of what it lacks: the limits themselves
(the ``web-app`` row's ``limits`` config), one log line per cause per interval, the event-stream slots,
the body deadline on ``receive`` and the quiet handler for ``accept()`` running out of files. The
protocol half (header deadline, connection cap) lives in ``connections.py``, which imports uvicorn.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pydsh.apps.web.errors import ApiError

log = logging.getLogger("pydsh.web")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]

REPORT_INTERVAL_S = 60.0
BODY_TIMED_OUT = "pydsh.body_timed_out"
ACCEPT_FAILED = "socket.accept() out of system resource"
INVALID_REQUEST = "Invalid HTTP request received."


class Limits(BaseModel):
    """The ``limits`` of the ``web-app`` row config; :meth:`fitted` keeps them inside the open-file limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    headerTimeoutMs: int = Field(default=10_000, gt=0)
    bodyTimeoutMs: int = Field(default=30_000, gt=0)
    maxConnections: int = Field(default=128, ge=2)
    maxStreams: int = Field(default=32, ge=1)
    maxStreamsPerClient: int = Field(default=8, ge=1)

    def fitted(self, open_files: int) -> Limits:
        """At most a quarter of the open-file limit for sockets, half of those for streams."""
        connections = max(2, min(self.maxConnections, open_files // 4))
        streams = max(1, min(self.maxStreams, connections // 2))
        per_client = min(self.maxStreamsPerClient, streams)
        return self.model_copy(
            update={"maxConnections": connections, "maxStreams": streams, "maxStreamsPerClient": per_client}
        )


def open_file_limit() -> int:
    """The soft ``RLIMIT_NOFILE`` of this process (unlimited counts as 65,536)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 65_536 if soft == resource.RLIM_INFINITY else int(soft)


class Reporter:
    """At most one warning per cause per interval; the next one says how many were held back."""

    def __init__(self, interval_s: float = REPORT_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[str, tuple[float, int]] = {}

    def report(self, cause: str, message: str) -> None:
        """Log ``message`` unless ``cause`` was logged less than an interval ago (then only count it)."""
        now = self.clock()
        last, held = self._last.get(cause, (float("-inf"), 0))
        if now - last < self.interval_s:
            self._last[cause] = (last, held + 1)
            return
        more = f" ({held} more since the last report)" if held else ""
        log.warning("%s%s", message, more)
        self._last[cause] = (now, 0)


class StreamSlots:
    """Open event streams, per client (its auth cookie) and in total (spec 12 §4.3: a tab holds two)."""

    def __init__(self, limits: Limits, reporter: Reporter) -> None:
        self.limits = limits
        self.reporter = reporter
        self.open = 0
        self._per_client: dict[str, int] = {}

    def acquire(self, client: str) -> Callable[[], None]:
        """A slot for one more stream of ``client``, else 429 (this client) or 503 (the server); returns its release."""
        total, mine = self.limits.maxStreams, self.limits.maxStreamsPerClient
        if self.open >= total:
            self.reporter.report("streams", f"refused an event stream: {total} are open (limits.maxStreams)")
            raise ApiError(503, "server_busy", f"The server already serves {total} event streams; try again later.")
        if self._per_client.get(client, 0) >= mine:
            self.reporter.report(
                "client-streams", f"refused an event stream: one client holds {mine} (limits.maxStreamsPerClient)"
            )
            raise ApiError(
                429, "too_many_streams", f"This browser already holds {mine} event streams; close some tabs."
            )
        self.open += 1
        self._per_client[client] = self._per_client.get(client, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.open -= 1
            left = self._per_client[client] - 1
            if left:
                self._per_client[client] = left
            else:
                del self._per_client[client]

        return release


class Throttle:
    """The limits of one server start, with the reporter and stream slots they share."""

    def __init__(self, limits: Limits, reporter: Reporter | None = None) -> None:
        self.limits = limits
        self.reporter = reporter or Reporter()
        self.streams = StreamSlots(limits, self.reporter)
        self.unwatch: Callable[[], None] = lambda: None

    def report(self, cause: str, message: str) -> None:
        """One warning per cause per interval (see :class:`Reporter`)."""
        self.reporter.report(cause, message)

    def body_deadline(self, scope: Scope, receive: Receive) -> Receive:
        """``receive`` that ends the request body ``bodyTimeoutMs`` after it is first asked for.

        On expiry it answers ``http.disconnect`` and marks the scope, so the body reader answers 408
        and a stream's disconnect listener just ends.
        """
        seconds = self.limits.bodyTimeoutMs / 1000
        deadline: float | None = None
        done = False

        async def timed() -> Message:
            nonlocal deadline, done
            if done:
                return await receive()
            loop = asyncio.get_running_loop()
            deadline = deadline if deadline is not None else loop.time() + seconds
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                done = True
                scope[BODY_TIMED_OUT] = True
                self.report("body", f"closed a request whose body did not arrive within {seconds:g} s")
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                done = True
            return message

        return timed

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Report failed ``accept()`` calls and uvicorn's invalid-request warnings once per interval.

        asyncio logs every ``accept()`` that runs out of files, up to a backlog's worth per wake-up;
        uvicorn logs every malformed request. :attr:`unwatch` undoes both.
        """
        previous = loop.get_exception_handler()

        def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if context.get("message") == ACCEPT_FAILED:
                reason = getattr(context.get("exception"), "strerror", None) or "out of resources"
                self.report("accept", f"cannot accept connections ({reason}); retrying every second")
            elif previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        def invalid(record: logging.LogRecord) -> bool:
            if record.msg != INVALID_REQUEST:
                return True
            self.report("invalid", "answered a malformed HTTP request with 400")
            return False

        uvicorn_log = logging.getLogger("uvicorn.error")
        loop.set_exception_handler(handler)
        uvicorn_log.addFilter(invalid)

        def undo() -> None:
            uvicorn_log.removeFilter(invalid)
            if loop.get_exception_handler() is handler:
                loop.set_exception_handler(previous)

        self.unwatch = undo
