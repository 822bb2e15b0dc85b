"""A loopback mock model provider speaking both wire dialects (spec 04 §9). Stdlib + asyncio only.

Each accepted request consumes one behaviour (FIFO): a named behaviour of spec 04 §9.2 or a
scripted entry (spec 04 §8.4) rendered in the request's dialect. ``POST /v1/messages`` answers in
Anthropic-Messages SSE, ``POST /chat/completions`` (and ``/v1/chat/completions``) in
chat-completions SSE. Unknown request body fields are ignored. An optional ``hold`` coroutine
function (our addition) is awaited with each parsed request body before that request takes its
behaviour, so a test can order concurrent requests (say, a subagent's after its parent's); an optional
``choose`` function (ours too) picks each request's behaviour from its body instead of the queue, so
concurrent sessions (a batch's tasks) can each follow a script of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import signal
import socket
import struct
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

MESSAGES_PATHS = frozenset({"/v1/messages"})
CHAT_PATHS = frozenset({"/chat/completions", "/v1/chat/completions"})
CONCRETE = (
    "success",
    "slow_success",
    "reasoning_success",
    "tool_call_success",
    "max_tokens",
    "empty",
    "empty_body",
    "stream_eof",
    "partial_eof",
    "connection_reset",
    "stream_disconnect",
    "partial_disconnect",
    "stall",
    "malformed_json",
    "malformed_event",
    "wrong_content_type",
    "rate_limit",
    "server_error",
    "service_unavailable",
    "auth_error",
    "invalid_request",
    "context_overflow",
    "quota_exceeded",
    "error_event",
)
BEHAVIOURS = frozenset({*CONCRETE, "random"})
DEFAULTS: dict[str, Any] = {
    "successText": "Hello from the mock model.",
    "partialText": "Partial answer",
    "reasoningText": "Thinking it over.",
    "chunkSize": 8,
    "chunkDelayMs": 25,
    "disconnectDelayMs": 10,
    "retryAfterMs": 1000,
    "requestId": None,
    "toolName": "mock_tool",
    "toolArguments": {"value": "mock"},
    "apiKey": None,
    "usage": None,
}
HTTP_ERRORS: dict[str, tuple[int, str, str, str | None]] = {
    "rate_limit": (429, "rate_limit_error", "mock rate limit", None),
    "server_error": (500, "api_error", "mock server error", None),
    "service_unavailable": (503, "overloaded_error", "mock service unavailable", None),
    "auth_error": (401, "authentication_error", "mock authentication failed", None),
    "invalid_request": (400, "invalid_request_error", "mock invalid request", None),
    "context_overflow": (
        400,
        "invalid_request_error",
        "mock input exceeds the model context window",
        "context_length_exceeded",
    ),
    "quota_exceeded": (429, "rate_limit_error", "mock insufficient quota", "insufficient_quota"),
}
CODE_TYPES = {
    "AUTH": (401, "authentication_error"),
    "QUOTA": (402, "rate_limit_error"),
    "RATE_LIMIT": (429, "rate_limit_error"),
    "INVALID_REQUEST": (400, "invalid_request_error"),
    "CONTEXT_WINDOW_EXCEEDED": (400, "invalid_request_error"),
    "SERVER": (500, "api_error"),
}
REASONS = {"messages": {"stop": "end_turn", "tool-calls": "tool_use", "max-tokens": "max_tokens"}}
REASONS["chat"] = {"stop": "stop", "tool-calls": "tool_calls", "max-tokens": "length"}
STATUS_TEXT = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 404: "Not Found"}
STATUS_TEXT |= {429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class _Exchange:
    """One HTTP response in progress on a connection."""

    def __init__(self, writer: asyncio.StreamWriter, request_id: str | None) -> None:
        self.writer = writer
        self.request_id = request_id

    async def head(self, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} {STATUS_TEXT.get(status, 'Status')}"]
        if self.request_id:
            headers = {**headers, "request-id": self.request_id, "x-request-id": self.request_id}
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await self.writer.drain()

    async def json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = _dumps(body).encode()
        extra = {"content-type": "application/json", "content-length": str(len(raw)), **(headers or {})}
        await self.head(status, extra)
        self.writer.write(raw)
        await self.writer.drain()

    async def open_stream(self, content_type: str = "text/event-stream") -> None:
        await self.head(
            200, {"content-type": content_type, "cache-control": "no-cache", "transfer-encoding": "chunked"}
        )

    async def send(self, text: str) -> None:
        raw = text.encode()
        self.writer.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
        await self.writer.drain()

    async def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    def reset(self) -> None:
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


class MockModelServer:
    """``async with MockModelServer(sequence=[...], **controls) as server`` → ``server.base_url``."""

    def __init__(
        self,
        sequence: Sequence[Any] = (),
        *,
        port: int = 0,
        repeat_last: bool = False,
        random_state: int | None = None,
        random_weights: dict[str, float] | None = None,
        hold: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        choose: Callable[[dict[str, Any]], Any] | None = None,
        **options: Any,
    ) -> None:
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown mock server options {sorted(unknown)}")
        for item in sequence:
            _check_behaviour(item)
        self.options = {**DEFAULTS, **options}
        self.queue: deque[Any] = deque(sequence)
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        """Connections accepted so far (a client that keeps its connections alive opens one per concurrent call)."""
        self.port = port
        self.repeat_last = repeat_last
        self.random = random.Random(random_state)
        self.weights = random_weights or {}
        self.hold = hold
        self.choose = choose
        self._last: Any = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, behaviour: Any) -> None:
        """Append one behaviour (a name or a scripted entry) to the queue."""
        _check_behaviour(behaviour)
        self.queue.append(behaviour)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> MockModelServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- connection handling ---------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections += 1
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError, ValueError):
            pass
        finally:
            self._connections.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; ``False`` ends the connection."""
        line = await reader.readline()
        if not line.strip():
            return False
        method, _, rest = line.decode("latin-1").strip().partition(" ")
        path = rest.rpartition(" ")[0].split("?")[0]
        headers: dict[str, str] = {}
        while (raw := await reader.readline()).strip():
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        exchange = _Exchange(writer, self.options["requestId"])
        dialect = "messages" if path in MESSAGES_PATHS else "chat" if path in CHAT_PATHS else None
        if method != "POST" or dialect is None:
            await exchange.json(404, _error_body("messages", "not_found_error", f"no route for {method} {path}", None))
            return True
        try:
            parsed = json.loads(body or b"null")
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            await exchange.json(400, _error_body(dialect, "invalid_request_error", "request body is not JSON", None))
            return True
        if not self._authorised(headers):
            await exchange.json(401, _error_body(dialect, "authentication_error", "mock invalid api key", None))
            return True
        if self.hold is not None:
            await self.hold(parsed)
        behaviour = self._choose(parsed)
        if behaviour is None:
            body_doc = {
                "error": {"message": "mock script exhausted", "type": "mock_error", "code": "MOCK_SCRIPT_EXHAUSTED"}
            }
            await exchange.json(500, body_doc)
            return True
        self.requests.append({"method": method, "path": path, "headers": headers, "body": parsed, "raw": body})
        return await _Responder(self, exchange, dialect, parsed, reader).run(behaviour)

    def _authorised(self, headers: dict[str, str]) -> bool:
        key = self.options["apiKey"]
        if not key:
            return True
        return headers.get("x-api-key") == key or headers.get("authorization") == f"Bearer {key}"

    def _choose(self, body: dict[str, Any]) -> Any:
        """The request's behaviour: ``choose``'s pick for its body when given, else the queue's next."""
        if self.choose is None:
            return self._take()
        behaviour = self.choose(body)
        _check_behaviour(behaviour)
        return behaviour

    def _take(self) -> Any:
        if self.queue:
            self._last = self.queue.popleft()
        elif not (self.repeat_last and self._last is not None):
            return None
        behaviour = self._last
        if behaviour == "random":
            names = [n for n in CONCRETE if n != "stall"]
            weights = [float(self.weights.get(n, 0 if self.weights else 1)) for n in names]
            behaviour = self.random.choices(names, weights)[0]
        return behaviour


def _check_behaviour(item: Any) -> None:
    if isinstance(item, str):
        if item not in BEHAVIOURS:
            raise ValueError(f"unknown mock behaviour {item!r}")
    elif not isinstance(item, dict):
        raise ValueError(f"a mock behaviour is a name or a scripted entry, not {type(item).__name__}")


def _error_body(dialect: str, kind: str, message: str, code: str | None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["code"] = code
    if dialect == "messages":
        return {"type": "error", "error": error}
    return {"error": {"message": message, "type": kind, **({"code": code} if code is not None else {})}}


class _Responder:
    """Renders one behaviour in one dialect."""

    def __init__(
        self,
        server: MockModelServer,
        exchange: _Exchange,
        dialect: str,
        body: dict[str, Any],
        reader: asyncio.StreamReader,
    ) -> None:
        self.server = server
        self.reader = reader
        self.options = server.options
        self.x = exchange
        self.dialect = dialect
        self.model = body.get("model") if isinstance(body.get("model"), str) else "mock-model"

    async def run(self, behaviour: Any) -> bool:
        if isinstance(behaviour, dict):
            return await self.scripted(behaviour)
        if behaviour in HTTP_ERRORS:
            status, kind, message, code = HTTP_ERRORS[behaviour]
            headers = {}
            if behaviour == "rate_limit":
                headers["retry-after"] = str(math.ceil(self.options["retryAfterMs"] / 1000))
            await self.x.json(status, _error_body(self.dialect, kind, message, code), headers)
            return True
        handler = getattr(self, f"b_{behaviour}")
        result: bool = await handler()
        return result

    # -- rendering ----------------------------------------------------------------------------

    def frame(self, payload: Any) -> str:
        if self.dialect == "messages":
            return f"event: {payload['type']}\ndata: {_dumps(payload)}\n\n"
        return f"data: {_dumps(payload)}\n\n"

    def chat_chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
            "choices": [choice],
        }

    def usage(self, output: int, override: dict[str, Any] | None = None) -> dict[str, int]:
        usage = (
            override
            or self.options["usage"]
            or {"input_tokens": 100, "output_tokens": output, "cache_read_input_tokens": 40}
        )
        return dict(usage)

    def opening(self, usage: dict[str, int]) -> list[str]:
        if self.dialect == "messages":
            start_usage = {k: v for k, v in usage.items() if k != "output_tokens"} | {"output_tokens": 0}
            message: dict[str, Any] = {
                "id": "msg_mock",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
            }
            return [
                self.frame({"type": "message_start", "message": {**message, "stop_reason": None, "usage": start_usage}})
            ]
        return [self.frame(self.chat_chunk({"role": "assistant", "content": ""}))]

    def render(self, chunks: list[dict[str, Any]], usage: dict[str, int] | None = None) -> list[str]:
        """Frames of harness chunks (one per wire event), including the dialect's terminator."""
        recorded = next((c["usage"] for c in chunks if c["type"] == "usage"), None)
        usage = usage or (_wire_usage(recorded) if recorded else self.usage(0))
        frames = self.opening(usage)
        renderer = self._messages if self.dialect == "messages" else self._chat
        state: dict[str, Any] = {"calls": {}, "signatures": {}}
        for i, chunk in enumerate(chunks):
            frames += renderer(chunk, chunks[i + 1 :], state, usage)
        return frames

    def _messages(
        self, chunk: dict[str, Any], rest: list[dict[str, Any]], state: dict[str, Any], usage: dict[str, int]
    ) -> list[str]:
        ctype, index = chunk["type"], chunk.get("index")
        if ctype == "block-start":
            kind = chunk["blockType"]
            if kind == "tool-call":
                call = next(
                    (c for c in rest if c.get("index") == index and c["type"] in ("tool-call-delta", "block-end")), {}
                )
                ident = call.get("id") or call.get("block", {}).get("id", "call_mock")
                name = call.get("name") or call.get("block", {}).get("name", "tool")
                block: dict[str, Any] = {"type": "tool_use", "id": ident, "name": name, "input": {}}
            else:
                block = {"type": "text", "text": ""} if kind == "text" else {"type": "thinking", "thinking": ""}
            return [self.frame({"type": "content_block_start", "index": index, "content_block": block})]
        if ctype in ("text-delta", "reasoning-delta"):
            delta = (
                {"type": "text_delta", "text": chunk["text"]}
                if ctype == "text-delta"
                else {"type": "thinking_delta", "thinking": chunk["text"]}
            )
            return [self.frame({"type": "content_block_delta", "index": index, "delta": delta})]
        if ctype == "tool-call-delta":
            if not chunk["argumentsDelta"]:
                return []
            delta = {"type": "input_json_delta", "partial_json": chunk["argumentsDelta"]}
            return [self.frame({"type": "content_block_delta", "index": index, "delta": delta})]
        if ctype == "block-end":
            frames = []
            if chunk["block"].get("type") == "reasoning" and state.get("signature"):
                delta = {"type": "signature_delta", "signature": state["signature"]}
                frames.append(self.frame({"type": "content_block_delta", "index": index, "delta": delta}))
            return [*frames, self.frame({"type": "content_block_stop", "index": index})]
        if ctype == "usage":
            usage.clear()
            usage.update(_wire_usage(chunk["usage"]))
            return []
        if ctype == "finish":
            return self._messages_finish(chunk["reason"], usage)
        return []

    def _messages_finish(self, reason: dict[str, Any], usage: dict[str, int]) -> list[str]:
        kind = reason["kind"]
        if kind in ("error", "aborted"):
            failure = reason.get("failure") or {}
            etype = CODE_TYPES.get(failure.get("code", ""), (500, "api_error"))[1]
            return [self.frame({"type": "error", "error": {"type": etype, "message": failure.get("message", "error")}})]
        delta = {"stop_reason": REASONS["messages"][kind], "stop_sequence": None}
        out = {"output_tokens": usage.get("output_tokens", 0)}
        return [
            self.frame({"type": "message_delta", "delta": delta, "usage": out}),
            self.frame({"type": "message_stop"}),
        ]

    def _chat(
        self, chunk: dict[str, Any], rest: list[dict[str, Any]], state: dict[str, Any], usage: dict[str, int]
    ) -> list[str]:
        ctype, index = chunk["type"], chunk.get("index")
        if ctype == "text-delta":
            return [self.frame(self.chat_chunk({"content": chunk["text"]}))]
        if ctype == "reasoning-delta":
            return [self.frame(self.chat_chunk({"reasoning_content": chunk["text"]}))]
        if ctype == "tool-call-delta":
            calls = state["calls"]
            if index not in calls:
                calls[index] = len(calls)
                fn = {"name": chunk.get("name", "tool"), "arguments": chunk["argumentsDelta"]}
                call = {"index": calls[index], "id": chunk["id"], "type": "function", "function": fn}
            elif not chunk["argumentsDelta"]:
                return []
            else:
                call = {"index": calls[index], "function": {"arguments": chunk["argumentsDelta"]}}
            return [self.frame(self.chat_chunk({"tool_calls": [call]}))]
        if ctype == "usage":
            usage.clear()
            usage.update(_wire_usage(chunk["usage"]))
            return []
        if ctype == "finish":
            reason = chunk["reason"]
            if reason["kind"] in ("error", "aborted"):
                failure = reason.get("failure") or {}
                etype = CODE_TYPES.get(failure.get("code", ""), (500, "api_error"))[1]
                return [self.frame({"error": {"message": failure.get("message", "error"), "type": etype}})]
            finish = self.frame(self.chat_chunk({}, REASONS["chat"][reason["kind"]]))
            return [
                finish,
                self.frame(
                    {
                        "id": "chatcmpl-mock",
                        "object": "chat.completion.chunk",
                        "choices": [],
                        "usage": _chat_usage(usage),
                    }
                ),
                "data: [DONE]\n\n",
            ]
        return []

    async def stream(
        self, frames: list[str], *, delay_ms: float = 0, content_type: str = "text/event-stream", end: bool = True
    ) -> bool:
        await self.x.open_stream(content_type)
        for frame in frames:
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            await self.x.send(frame)
        if end:
            await self.x.end()
        return True

    # -- behaviours ---------------------------------------------------------------------------

    def text_chunks(self, text: str, kind: str = "text", index: int = 0) -> list[dict[str, Any]]:
        delta = "text-delta" if kind == "text" else "reasoning-delta"
        chunks: list[dict[str, Any]] = [{"type": "block-start", "index": index, "blockType": kind}]
        chunks += [{"type": delta, "index": index, "text": p} for p in _pieces(text, int(self.options["chunkSize"]))]
        chunks.append({"type": "block-end", "index": index, "block": {"type": kind, "text": text}})
        return chunks

    def success_frames(self) -> list[str]:
        text = self.options["successText"]
        chunks = [*self.text_chunks(text), {"type": "finish", "reason": {"kind": "stop"}}]
        return self.render(chunks, self.usage(len(text)))

    async def b_success(self) -> bool:
        return await self.stream(self.success_frames())

    async def b_slow_success(self) -> bool:
        return await self.stream(self.success_frames(), delay_ms=self.options["chunkDelayMs"])

    async def b_wrong_content_type(self) -> bool:
        return await self.stream(self.success_frames(), content_type="application/json")

    async def b_reasoning_success(self) -> bool:
        reasoning, text = self.options["reasoningText"], self.options["successText"]
        chunks = [*self.text_chunks(reasoning, "reasoning", 0), *self.text_chunks(text, "text", 1)]
        chunks.append({"type": "finish", "reason": {"kind": "stop"}})
        frames = self.opening(self.usage(len(reasoning) + len(text)))
        state = {"calls": {}, "signature": "mock-signature"}
        usage = self.usage(len(reasoning) + len(text))
        for i, chunk in enumerate(chunks):
            frames += (self._messages if self.dialect == "messages" else self._chat)(
                chunk, chunks[i + 1 :], state, usage
            )
        return await self.stream(frames)

    async def b_tool_call_success(self) -> bool:
        args = _dumps(self.options["toolArguments"])
        half = len(args) // 2
        call = {"type": "tool-call-delta", "index": 0, "id": "call_mock_1"}
        chunks = [
            {"type": "block-start", "index": 0, "blockType": "tool-call"},
            {**call, "name": self.options["toolName"], "argumentsDelta": ""},
            {**call, "argumentsDelta": args[:half]},
            {**call, "argumentsDelta": args[half:]},
            {
                "type": "block-end",
                "index": 0,
                "block": {
                    "type": "tool-call",
                    "id": "call_mock_1",
                    "name": self.options["toolName"],
                    "arguments": args,
                },
            },
            {"type": "finish", "reason": {"kind": "tool-calls"}},
        ]
        return await self.stream(self.render(chunks, self.usage(len(args))))

    async def b_max_tokens(self) -> bool:
        text = self.options["successText"]
        chunks = [*self.text_chunks(text), {"type": "finish", "reason": {"kind": "max-tokens"}}]
        return await self.stream(self.render(chunks, self.usage(len(text))))

    async def b_empty(self) -> bool:
        if self.dialect == "messages":
            return await self.stream(self.render([{"type": "finish", "reason": {"kind": "stop"}}]))
        usage = _chat_usage(self.usage(0))
        frames = [
            self.frame(self.chat_chunk({}, "stop")),
            self.frame({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "choices": [], "usage": usage}),
            "data: [DONE]\n\n",
        ]
        return await self.stream(frames)

    async def b_empty_body(self) -> bool:
        return await self.stream([])

    async def b_stream_eof(self) -> bool:
        return await self.stream(self.opening(self.usage(0)))

    def partial_frames(self) -> list[str]:
        chunks = self.text_chunks(self.options["partialText"])[:-1]
        return self.render(chunks)

    async def b_partial_eof(self) -> bool:
        return await self.stream(self.partial_frames())

    async def b_connection_reset(self) -> bool:
        self.x.reset()
        return False

    async def b_stream_disconnect(self) -> bool:
        await self.x.open_stream()
        self.x.reset()
        return False

    async def b_partial_disconnect(self) -> bool:
        await self.stream(self.partial_frames(), end=False)
        await asyncio.sleep(self.options["disconnectDelayMs"] / 1000)
        self.x.reset()
        return False

    async def until_client_leaves(self) -> bool:
        """Hold the response open until the client closes the connection."""
        while await self.reader.read(65536):
            pass
        return False

    async def b_stall(self) -> bool:
        await self.x.open_stream()
        return await self.until_client_leaves()

    async def b_malformed_json(self) -> bool:
        return await self.stream(["data: {not-json\n\n"])

    async def b_malformed_event(self) -> bool:
        if self.dialect == "messages":
            bad = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}
            return await self.stream([*self.opening(self.usage(0)), self.frame(bad)])
        return await self.stream([self.frame({"choices": [None]})])

    async def b_error_event(self) -> bool:
        error = {"type": "overloaded_error", "message": "busy"}
        frame = (
            self.frame({"type": "error", "error": error})
            if self.dialect == "messages"
            else self.frame({"error": error})
        )
        return await self.stream([frame])

    async def scripted(self, entry: dict[str, Any]) -> bool:
        from pydsh.llm.scripted import compile_entry

        canonical = compile_entry(
            entry, len(self.server.requests), input_chars=0, chunk_size=int(self.options["chunkSize"])
        )
        chunks = canonical.get("chunks", [])
        if canonical["kind"] == "throw":
            status, kind = CODE_TYPES.get(canonical["code"], (500, "api_error"))
            status = canonical.get("status", status)
            if chunks:
                failure = {"message": canonical["message"], "code": canonical["code"]}
                return await self.stream(
                    self.render([*chunks, {"type": "finish", "reason": {"kind": "error", "failure": failure}}])
                )
            await self.x.json(status, _error_body(self.dialect, kind, canonical["message"], None))
            return True
        if canonical["kind"] == "hang":
            await self.stream(self.render(self.text_chunks("partial")[:-1]), end=False)
            return await self.until_client_leaves()
        return await self.stream(self.render(chunks))


def _wire_usage(usage: dict[str, Any]) -> dict[str, int]:
    out = {"input_tokens": int(usage.get("inputTokens", 0)), "output_tokens": int(usage.get("outputTokens", 0))}
    if "cacheReadTokens" in usage:
        out["cache_read_input_tokens"] = int(usage["cacheReadTokens"])
    if "cacheWriteTokens" in usage:
        out["cache_creation_input_tokens"] = int(usage["cacheWriteTokens"])
    return out


def _chat_usage(usage: dict[str, int]) -> dict[str, Any]:
    cached = usage.get("cache_read_input_tokens", 0)
    prompt = usage.get("input_tokens", 0) + cached
    completion = usage.get("output_tokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


# -- CLI -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pydsh.testing.mock_model_server", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--sequence", default="success", help="comma-separated behaviours")
    parser.add_argument("--repeat-last", action="store_true")
    parser.add_argument("--random-state", type=int)
    parser.add_argument("--random-weights", help="name=weight,... for the random behaviour")
    parser.add_argument("--listen-delay-ms", type=int, default=0)
    for option, default in DEFAULTS.items():
        flag = "--" + "".join("-" + c.lower() if c.isupper() else c for c in option)
        kind = int if isinstance(default, int) else str
        parser.add_argument(flag, dest=option, type=kind, default=None)
    return parser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _serve(args: argparse.Namespace) -> None:
    sequence = [s.strip() for s in args.sequence.split(",") if s.strip()]
    delay = 0
    if sequence and sequence[0] == "connection_refused":
        sequence.pop(0)
        delay = args.listen_delay_ms
    controls = {k: getattr(args, k) for k in DEFAULTS if getattr(args, k) is not None}
    if isinstance(controls.get("toolArguments"), str):
        controls["toolArguments"] = json.loads(controls["toolArguments"])
    if isinstance(controls.get("usage"), str):
        controls["usage"] = json.loads(controls["usage"])
    weights = None
    if args.random_weights:
        weights = {k: float(v) for k, _, v in (w.partition("=") for w in args.random_weights.split(","))}
    port = args.port or (_free_port() if delay else 0)
    server = MockModelServer(
        sequence,
        port=port,
        repeat_last=args.repeat_last,
        random_state=args.random_state,
        random_weights=weights,
        **controls,
    )
    if delay:
        print(json.dumps({"type": "ready", "baseUrl": server.base_url}), flush=True)
        await asyncio.sleep(delay / 1000)
    await server.start()
    if not delay:
        print(json.dumps({"type": "ready", "baseUrl": server.base_url}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    """Run the mock until interrupted."""
    args = _parser().parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except ValueError as exc:
        print(f"mock_model_server: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
