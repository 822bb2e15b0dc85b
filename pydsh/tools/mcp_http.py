"""The HTTP transports of the MCP client (streamable HTTP and the legacy SSE transport), bounded like stdio.

The ``mcp`` package reads HTTP bodies and server-sent events itself, so the bounds sit in the HTTP
client it is given: a transport that rewrites each JSON body and each event's data the way the stdio
reader treats a line (:mod:`pydsh.tools.mcp_limits`). A message past the limit is never held; the
request it answers gets the reason as its JSON-RPC error.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2

from pydsh.tools.mcp_limits import (
    EDGE_BYTES,
    LARGE_MESSAGE_BYTES,
    Bounds,
    Refusal,
    bound_message,
    diagnose,
    locate,
    oversized,
    surrogate_escaped,
)

log = logging.getLogger("pydsh.tools.mcp")

CONNECT_TIMEOUT_S = 30.0
"""Bound of connecting, writing and waiting for a pooled connection (reads wait for the call timeout)."""


@contextlib.asynccontextmanager
async def http_transport(
    kind: str, url: str, headers: Mapping[str, str], *, read_timeout_s: float, bounds: Bounds, label: str
) -> AsyncIterator[tuple[Any, Any]]:
    """``(read, write)`` streams of a streamable-HTTP (``kind`` ``streamable-http``) or legacy SSE server.

    Leaving the context normally ends a streamable-HTTP session with the ``DELETE`` the protocol defines.
    """

    def client(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        """The ``mcp`` package's client factory: our timeouts, and every body bounded."""
        inner = httpx2.AsyncHTTPTransport()
        limits = httpx2.Timeout(CONNECT_TIMEOUT_S, read=read_timeout_s)
        return httpx2.AsyncClient(
            headers=headers, timeout=limits, auth=auth, transport=BoundedTransport(inner, bounds, label)
        )

    if kind == "sse":
        from mcp.client.sse import sse_client

        async with sse_client(
            url, headers=dict(headers), sse_read_timeout=read_timeout_s, httpx_client_factory=client
        ) as streams:
            yield streams
        return
    from mcp.client.streamable_http import streamable_http_client

    async with (
        client(dict(headers)) as http,
        streamable_http_client(url, http_client=http, max_sse_event_size=None) as streams,
    ):
        yield streams


def _request_id(request: httpx2.Request) -> Any:
    """The id of the JSON-RPC request a POST carries (``None`` for anything else)."""
    if request.method != "POST":
        return None
    try:
        body = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    return body.get("id") if isinstance(body, dict) and "method" in body else None


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport whose JSON and event-stream bodies carry only messages within the bounds."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, bounds: Bounds, label: str) -> None:
        self.inner = inner
        self.bounds = bounds
        self.label = label

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """The response with its body rewritten message by message."""
        response = await self.inner.handle_async_request(request)
        kind = response.headers.get("content-type", "")
        rewrite = _Rewrite(self.bounds, _request_id(request), self.label)
        if kind.startswith("application/json"):
            body: Any = _JsonBody(response.stream, rewrite)
        elif kind.startswith("text/event-stream"):
            body = _EventBody(response.stream, rewrite)
        else:
            return response
        headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"]
        return httpx2.Response(
            response.status_code, headers=headers, stream=body, request=request, extensions=response.extensions
        )


class _Rewrite:
    """One message's text as it may reach the ``mcp`` package: unchanged, walked, or replaced by a refusal."""

    def __init__(self, bounds: Bounds, request_id: Any, label: str) -> None:
        self.bounds = bounds
        self.request_id = request_id
        self.label = label

    def message(self, data: bytes | bytearray) -> bytes | None:
        """``data`` bounded; ``None`` when it is dropped (a refused message that answers nothing)."""
        if len(data) < LARGE_MESSAGE_BYTES:
            problem = surrogate_escaped(bytes(data))
            return bytes(data) if problem is None else self.refused(problem)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self.refused(diagnose(bytes(data)))
        try:
            return json.dumps(bound_message(text, self.bounds)).encode()
        except Refusal as refusal:
            return self.refused(refusal)

    def refused(self, refusal: Refusal) -> bytes | None:
        """The JSON-RPC error answering the refused message's request, or ``None`` (logged) when it answers none.

        A message in a POST's response stream that may be a response answers that POST's request.
        """
        message_id = refusal.message_id if refusal.message_id is not None else self.request_id
        if refusal.response is False or message_id is None:
            log.warning("%s: transport error: the server %s", self.label, refusal.text)
            return None
        return json.dumps({"jsonrpc": "2.0", "id": message_id, "error": refusal.error_data()}).encode()

    def too_large(self, size: int, head: bytes, tail: bytes) -> bytes | None:
        """The answer to a message past the limit, of which only its ends were kept."""
        return self.refused(locate(oversized(size, self.bounds.max_message_bytes), head, tail))


class _JsonBody(httpx2.AsyncByteStream):
    """A JSON body: one message, of which at most ``maxMessageBytes`` is held."""

    def __init__(self, stream: Any, rewrite: _Rewrite) -> None:
        self.stream = stream
        self.rewrite = rewrite

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The body as one bounded message (or its refusal), read with at most the limit held."""
        limit = self.rewrite.bounds.max_message_bytes
        held = bytearray()
        head, tail, size = b"", b"", 0
        async for chunk in self.stream:
            size += len(chunk)
            if size <= limit:
                held += chunk
                continue
            if held:
                head, held = bytes(held[:EDGE_BYTES]), bytearray()
            tail = (tail + chunk)[-EDGE_BYTES:]
        out = self.rewrite.too_large(size, head, tail) if size > limit else self.rewrite.message(held)
        if out is not None:
            yield out


class _EventBody(_JsonBody):
    """An event stream: each event's data is one message; other fields pass unchanged."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The stream event by event, lines split in linear time; a line past the limit is only counted."""
        event = _Event(self.rewrite)
        buffer = bytearray()
        scan = 0
        async for chunk in self.stream:
            data = chunk
            if event.overflowing:
                newline = data.find(b"\n")
                event.more(data if newline < 0 else data[:newline])
                if newline < 0:
                    continue
                event.overflowing, data = False, data[newline + 1 :]
            buffer += data
            start, out = 0, []
            while (newline := buffer.find(b"\n", scan)) >= 0:
                out.append(event.line(_line(buffer, start, newline)))
                start = scan = newline + 1
            del buffer[:start]
            scan = len(buffer)
            if len(buffer) > event.limit:
                event.overflow(bytes(buffer))
                buffer, scan = bytearray(), 0
            if any(out):
                yield b"".join(out)
        rest = event.line(bytes(buffer).rstrip(b"\r")) + event.line(b"")
        if rest:
            yield rest


class _Event:
    """The event being read: its other fields, and its data up to the message limit (then only counted)."""

    def __init__(self, rewrite: _Rewrite) -> None:
        self.rewrite = rewrite
        self.limit = rewrite.bounds.max_message_bytes
        self.fields: list[bytes] = []
        self.data: list[bytes] = []
        self.size = 0
        self.head = self.tail = b""
        self.overflowing = False
        """A line past the limit is still arriving."""

    def line(self, line: bytes) -> bytes:
        """Take one line; a blank line ends the event and returns it, rewritten."""
        if line:
            if line.startswith(b"data:"):
                self._data(_value(line))
            else:
                self.fields.append(line + b"\n")
            return b""
        if not self.fields and not self.data and not self.size:
            return b""
        return self._end()

    def overflow(self, start: bytes) -> None:
        """The start of a line that alone is past the limit: its event is refused, the rest of it counted."""
        self.overflowing = True
        self._data(_value(start) if start.startswith(b"data:") else start)

    def more(self, part: bytes) -> None:
        """More of the line past the limit."""
        self.size += len(part)
        self.tail = (self.tail + part)[-EDGE_BYTES:]

    def _data(self, value: bytes) -> None:
        """Add one ``data`` line; past the limit keep only the event's ends and size."""
        self.size += len(value) + (1 if self.size else 0)
        if self.size <= self.limit:
            self.data.append(value)
            self.tail = value[-EDGE_BYTES:]
            return
        if self.data or not self.head:
            self.head = (b"\n".join(self.data) or value)[:EDGE_BYTES]
            self.data = []
        self.tail = (self.tail + value)[-EDGE_BYTES:]

    def _end(self) -> bytes:
        """The finished event, its data bounded (or the refusal in its place); resets for the next."""
        fields, size, data = b"".join(self.fields), self.size, b"\n".join(self.data)
        head, tail = self.head, self.tail
        self.fields, self.data, self.size, self.head, self.tail = [], [], 0, b"", b""
        if size > self.limit:
            out = self.rewrite.too_large(size, head, tail)
        elif data:
            out = self.rewrite.message(data)
        else:
            return fields + b"\n"
        return b"" if out is None else fields + b"data: " + out + b"\n\n"


def _line(buffer: bytearray, start: int, newline: int) -> bytes:
    """One line of ``buffer`` without its line ending, copied once."""
    end = newline - 1 if newline > start and buffer[newline - 1] == ord("\r") else newline
    with memoryview(buffer) as view:
        return bytes(view[start:end])


def _value(line: bytes) -> bytes:
    """The value of a ``data:`` line (one leading space is part of the syntax)."""
    return line[6:] if line.startswith(b"data: ") else line[5:]
