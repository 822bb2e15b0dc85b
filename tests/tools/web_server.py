"""A small HTTP/1.1 server on 127.0.0.1 for ``web_fetch`` tests: scripted routes, recorded requests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from pydsh.tools.web import WebFetcher


@dataclass
class Reply:
    """A scripted response: ``chunks`` with a content length, or the first chunk repeated forever (chunked)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    stall: bool = False
    endless: bool = False


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


class WebServer:
    """Serves ``routes`` (path → :class:`Reply`) and records each request's path and headers."""

    def __init__(self, routes: dict[str, Reply]) -> None:
        self.routes = routes
        self.seen: list[Seen] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> WebServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._handlers:
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._answer(reader, writer)
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            path = head[0].split(" ")[1]
            headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
            self.seen.append(Seen(path, headers))
            reply = self.routes.get(path, Reply(404, {"content-type": "text/plain"}, [b"not found"]))
            await self._send(reply, writer)

    async def _send(self, reply: Reply, writer: asyncio.StreamWriter) -> None:
        lines = [f"HTTP/1.1 {reply.status} X", "connection: close", *(f"{k}: {v}" for k, v in reply.headers.items())]
        body = b"".join(reply.chunks)
        lines.append("transfer-encoding: chunked" if reply.endless else f"content-length: {len(body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        if reply.stall:
            await asyncio.Event().wait()
        if not reply.endless:
            writer.write(body)
            await writer.drain()
            return
        chunk = reply.chunks[0]
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()


PUBLIC = "93.184.216.34"
"""A public address the fake resolver answers with; the test transport carries it to 127.0.0.1."""


class Loopback(httpx.AsyncBaseTransport):
    """The fetcher's network seam for tests: names resolve to ``PUBLIC`` (or ``answers``), and requests the
    fetcher sends to ``PUBLIC`` are delivered to 127.0.0.1. Records what was resolved and requested."""

    def __init__(self, answers: Callable[[str], list[str]] | None = None) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.answers = answers
        self.resolved: list[str] = []
        self.urls: list[str] = []

    def attach(self, fetcher: WebFetcher) -> Loopback:
        fetcher.resolve = self.resolve
        fetcher.transport = self
        return self

    async def resolve(self, host: str) -> list[str]:
        self.resolved.append(host)
        return self.answers(host) if self.answers is not None else [PUBLIC]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        if request.url.host != PUBLIC:
            raise httpx.ConnectError(f"test network reaches only {PUBLIC}", request=request)
        request.url = request.url.copy_with(host="127.0.0.1")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Kept open across fetches (each fetch closes its client); the test closes ``inner``."""
