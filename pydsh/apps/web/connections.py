"""uvicorn's h11 protocol with the connection limits it lacks (imported only when ``pydsh web`` serves).

- **Header deadline**: a request's header must arrive within ``headerTimeoutMs`` of the connection
  opening or of the previous response; else a 408 (when part of a request came) and the socket closes.
  uvicorn's ``timeout_keep_alive`` stops at the first byte, so one byte at a time held a socket forever.
- **Connection cap**: above ``maxConnections`` the connection that has waited longest for a request
  (an idle keep-alive or a slow header) is closed to make room; when every connection is busy the new
  one gets a 503 and is closed. uvicorn's ``limit_concurrency`` answers only once a header arrives and
  never frees a socket, so slow sockets could still hold every file.
- A response sent while the request body is still unread (413, 408, a handler that ignores it) closes
  the connection instead of reading the rest for ever.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from pydsh.apps.web.errors import error_body
from pydsh.apps.web.guard import SECURITY_HEADERS
from pydsh.apps.web.limits import Throttle

REFUSAL_LINGER_S = 1.0
"""How long a refused connection may still send before it is closed (so the client reads the 503)."""


def raw_response(status: int, reason: str, code: str, message: str) -> bytes:
    """A complete ``Connection: close`` response carrying the API's one-line JSON error."""
    body = json.dumps(error_body(code, message)).encode()
    head = [
        f"HTTP/1.1 {status} {reason}".encode(),
        b"content-type: application/json",
        f"content-length: {len(body)}".encode(),
        b"connection: close",
        b"cache-control: no-store",
        *(name + b": " + value for name, value in SECURITY_HEADERS),
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def protocol_class(throttle: Throttle) -> type[H11Protocol]:
    """The protocol class for ``uvicorn.Config(http=…)`` bound to one server's limits."""

    class Bound(GuardedProtocol):
        pass

    Bound.throttle = throttle
    return Bound


class GuardedProtocol(H11Protocol):
    """:class:`H11Protocol` plus a header deadline, a connection cap and a close after unread bodies."""

    throttle: Throttle

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_since: float | None = None
        self._partial = False
        self._refused = False

    # -- asyncio protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the header deadline, then keep within the cap (closing an idle one, else refusing this one)."""
        super().connection_made(transport)
        self._wait_for_request()
        if not self._make_room():
            self._refuse()

    def data_received(self, data: bytes) -> None:
        """Feed uvicorn; a header that completes a request ends the deadline (a refused one is dropped)."""
        if self._refused:
            return
        cycle = self.cycle
        if self._waiting_since is not None:
            self._partial = True
        super().data_received(data)
        if self.cycle is not cycle:
            self._request_started()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the pending timer with the connection."""
        self._cancel()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        """Close when the request body is still unread, else wait for the next request under the deadline."""
        cycle = self.cycle
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.conn.our_state is h11.DONE and self.conn.their_state is not h11.DONE:
            self.transport.close()
        elif self.cycle is cycle:
            self._wait_for_request()
        else:
            self._request_started()

    # -- header deadline --------------------------------------------------------------------------

    def _wait_for_request(self) -> None:
        """Start the header deadline: the next request must arrive within ``headerTimeoutMs``."""
        self._cancel()
        self._waiting_since = self.loop.time()
        self._partial = False
        self._timer = self.loop.call_later(self.throttle.limits.headerTimeoutMs / 1000, self._header_expired)

    def _request_started(self) -> None:
        """A whole header arrived: no deadline (the body has its own) and no longer idle for eviction."""
        self._cancel()
        self._waiting_since = None

    def _cancel(self) -> None:
        """Cancel the header deadline or the refusal's linger timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _header_expired(self) -> None:
        """408 to a client that began a request and did not finish its header; an idle one just closes."""
        self._timer = None
        if self.transport.is_closing():
            return
        if self._partial:
            seconds = self.throttle.limits.headerTimeoutMs / 1000
            self.throttle.report("header", f"closed a connection whose request header took over {seconds:g} s")
            message = f"The request header did not arrive within {seconds:g} seconds."
            self.transport.write(raw_response(408, "Request Timeout", "request_timeout", message))
        self.transport.close()

    # -- connection cap ---------------------------------------------------------------------------

    def _make_room(self) -> bool:
        """Within the cap, or room made by closing the connection that has waited longest for a request."""
        limit = self.throttle.limits.maxConnections
        live = [c for c in self.connections if not c.transport.is_closing()]
        if len(live) <= limit:
            return True
        idle = [c for c in live if isinstance(c, GuardedProtocol) and c is not self and c._waiting_since is not None]
        if not idle:
            self.throttle.report("connections", f"refused a connection: {limit} are busy (limits.maxConnections)")
            return False
        oldest = min(idle, key=lambda c: c._waiting_since or 0.0)
        oldest._cancel()
        oldest.transport.close()
        self.throttle.report("evicted", f"closed an idle connection to stay within {limit} (limits.maxConnections)")
        return True

    def _refuse(self) -> None:
        """503 and close; what the client already sent is read and dropped so it gets the answer."""
        self._refused = True
        self._cancel()
        message = "The server has too many open connections; try again shortly."
        self.transport.write(raw_response(503, "Service Unavailable", "server_busy", message))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._timer = self.loop.call_later(REFUSAL_LINGER_S, self.transport.close)
        else:
            self.transport.close()
