"""A loopback OTLP/HTTP trace receiver: decodes each ``ExportTraceServiceRequest`` POSTed to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Span:
    """One received span, its attributes as plain values."""

    name: str
    span_id: bytes
    parent_id: bytes
    trace_id: bytes
    status: int
    message: str
    attributes: dict[str, Any]
    resource: dict[str, Any]


@dataclass
class Receiver:
    """What the receiver got: every span, in arrival order, and the request paths."""

    url: str
    spans: list[Span] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]

    def children(self, parent: Span) -> list[Span]:
        return [s for s in self.spans if s.parent_id == parent.span_id]


def value(any_value: Any) -> Any:
    """A protobuf ``AnyValue`` as a Python value (arrays as lists)."""
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def decode(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                attributes = {a.key: value(a.value) for a in span.attributes}
                spans.append(
                    Span(
                        span.name,
                        span.span_id,
                        span.parent_span_id,
                        span.trace_id,
                        span.status.code,
                        span.status.message,
                        attributes,
                        resource,
                    )
                )
    return spans


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, receiver: Receiver) -> None:
    """Answer every HTTP/1.1 request of one connection with an empty export response."""
    reply = ExportTraceServiceResponse().SerializeToString()
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            receiver.paths.append(lines[0].split(" ")[1])
            receiver.spans += decode(body)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                + f"Content-Length: {len(reply)}\r\n\r\n".encode()
                + reply
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@asynccontextmanager
async def otlp_receiver() -> AsyncIterator[Receiver]:
    """A receiver listening on 127.0.0.1 (a free port) while the block runs."""
    receiver = Receiver("")
    server = await asyncio.start_server(lambda r, w: serve(r, w, receiver), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    receiver.url = f"http://127.0.0.1:{port}"
    async with server:
        yield receiver
