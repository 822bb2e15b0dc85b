"""A small real MCP server built with the ``mcp`` package, for tests and benchmarks of the MCP client.

Run as ``python -m pydsh.testing.mcp_server [options]``: stdio by default, or streamable HTTP (``--http``)
or the legacy SSE transport (``--sse``) on a loopback port (the first stdout line is then ``PORT <n>``).
Its tools exercise what a client must survive: mixed content, ``isError``, a hang, a crash, an invalid
result (sent through a middleware that short-circuits the result), a response that is not valid JSON, a
huge result or one of very many items, the server's own JSON-RPC errors, a tool list that changes (also
mid-call), duplicate listings, paging and thousands of tools; ``write`` changes a file and ``peek``, the
one tool annotated ``readOnlyHint``, only reads one. It also publishes two resources (text and binary,
listed one per page), a resource template and two prompts. Files named by options steer a running server from
the test (fail at start, fail the next listing) or record what it saw (the HTTP requests), since a stdio
server shares nothing else with its test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

PATH_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
BASE_TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "mixed", "description": "Every content type at once.", "inputSchema": {"type": "object"}},
    {"name": "fail", "description": "A tool-level error.", "inputSchema": {"type": "object"}},
    {"name": "empty", "description": "No content at all.", "inputSchema": {"type": "object"}},
    {"name": "hang", "description": "Never answers.", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Exits the server mid-call.", "inputSchema": {"type": "object"}},
    {"name": "lie", "description": "Answers with an invalid result.", "inputSchema": {"type": "object"}},
    {"name": "pid", "description": "The server's process id.", "inputSchema": {"type": "object"}},
    {
        "name": "env",
        "description": "One environment variable of the server.",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
    {
        "name": "toggle",
        "description": "Add or remove the tool `extra` and announce it.",
        "inputSchema": {"type": "object"},
    },
    {"name": "vanish", "description": "Removes itself, announces it, then answers.", "inputSchema": {"type": "object"}},
    {"name": "read.file", "description": "A name with a dot.", "inputSchema": {"type": "object"}},
    {
        "name": "noise",
        "description": "Prints a line that is not JSON-RPC.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "structured",
        "description": "Structured content beside the text.",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    },
    {
        "name": "tasked",
        "description": "Needs task-based execution.",
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "big",
        "description": "One text item of the given size.",
        "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]},
    },
    {
        "name": "many",
        "description": "The given number of text items.",
        "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
    },
    {
        "name": "garbled",
        "description": "Answers with a lone surrogate escape, which is not valid JSON text (stdio only).",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "rpc_error",
        "description": "Answers with a JSON-RPC error of the given code.",
        "inputSchema": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        },
    },
    {
        "name": "write",
        "description": "Write text to a file.",
        "inputSchema": PATH_SCHEMA | {"properties": {"path": {"type": "string"}, "text": {"type": "string"}}},
    },
    {
        "name": "peek",
        "description": "Read a file.",
        "inputSchema": PATH_SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
]
EXTRA = {"name": "extra", "description": "Present after toggle.", "inputSchema": {"type": "object"}}
WIRE = 1
"""The stdout descriptor the protocol is written to."""
GENERATED_DESCRIPTION = "A generated tool that does nothing useful; it only makes the tool list long. " * 3
GENERATED_PROPERTIES = {f"option_{i}": {"type": "string", "description": f"Option {i} of many."} for i in range(16)}
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pydsh.testing.mcp_server")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP on 127.0.0.1")
    parser.add_argument("--sse", action="store_true", help="serve the legacy SSE transport on 127.0.0.1")
    parser.add_argument("--request-log", default=None, help="append each HTTP request's method and path here")
    parser.add_argument("--tools", type=int, default=0, help="list this many generated tools after the others")
    parser.add_argument("--start-delay", type=float, default=0.0, help="seconds to wait before serving")
    parser.add_argument("--instructions", default=None)
    parser.add_argument("--instructions-bytes", type=int, default=0, help="instructions of this many bytes")
    parser.add_argument("--no-tools", action="store_true", help="no tools capability")
    parser.add_argument("--no-resources", action="store_true", help="no resources or prompts capability")
    parser.add_argument("--duplicate", action="store_true", help="list `echo` twice")
    parser.add_argument("--page-size", type=int, default=0, help="page the tool list")
    parser.add_argument("--fail-if-exists", default=None, help="exit 3 at start when this file exists")
    parser.add_argument("--fail-list-if-exists", default=None, help="fail tools/list while this file exists")
    parser.add_argument("--orphan-pidfile", default=None, help="leave a process holding stderr; write its pid here")
    return parser.parse_args(argv)


class Behaviour:
    """The server's mutable state and its handlers."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tools = [dict(t) for t in BASE_TOOLS]
        self.listed = asyncio.Event()
        if args.duplicate:
            self.tools.append(dict(BASE_TOOLS[0]))
        self.tools.extend(generated(i) for i in range(args.tools))

    async def announce(self, session: Any) -> None:
        """Send ``list_changed`` and answer only once the client listed again (or 5 s passed)."""
        self.listed.clear()
        await session.send_tool_list_changed()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.listed.wait(), 5)

    def listing(self, cursor: str | None) -> dict[str, Any]:
        self.listed.set()
        fail = self.args.fail_list_if_exists
        if fail and os.path.exists(fail):
            raise RuntimeError("tool listing refused")
        size = self.args.page_size or len(self.tools)
        start = int(cursor or 0)
        page: dict[str, Any] = {"tools": self.tools[start : start + size]}
        if start + size < len(self.tools):
            page["nextCursor"] = str(start + size)
        return page

    async def call(self, name: str, arguments: dict[str, Any], ctx: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError

        if name != "vanish" and all(t["name"] != name for t in self.tools):
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {name}")
        if name in SIZES:
            return SIZES[name](int(arguments[SIZE_ARGUMENT[name]]))
        if name in FILES:
            return FILES[name](arguments)
        if name == "rpc_error":
            raise MCPError(code=int(arguments["code"]), message=str(arguments["message"]))
        if name == "garbled":
            garbled = '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"a\\ud800b"}]}}\n'
            os.write(WIRE, (garbled % json.dumps(ctx.request_id)).encode())
            await asyncio.Event().wait()
        session = ctx.session
        if name == "echo":
            return _text(str(arguments.get("text")))
        if name == "mixed":
            return {
                "content": [
                    {"type": "text", "text": "one"},
                    {"type": "text", "text": "two"},
                    {"type": "resource_link", "name": "notes", "uri": "file:///tmp/notes.txt"},
                    {"type": "image", "data": PNG_1PX, "mimeType": "image/png"},
                    {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                    {"type": "resource", "resource": {"uri": "file:///x", "text": "inner"}},
                ]
            }
        if name == "fail":
            return {"content": [{"type": "text", "text": "the widget is broken"}], "isError": True}
        if name == "empty":
            return {"content": []}
        if name == "hang":
            await asyncio.Event().wait()
        if name == "crash":
            os._exit(7)
        if name == "noise":
            os.write(WIRE, b"this is not JSON-RPC\n")
            return _text("noisy")
        if name == "pid":
            return _text(str(os.getpid()))
        if name == "env":
            return _text(os.environ.get(str(arguments.get("name")), "<unset>"))
        if name == "toggle":
            present = any(t["name"] == "extra" for t in self.tools)
            self.tools = [t for t in self.tools if t["name"] != "extra"] if present else [*self.tools, EXTRA]
            await self.announce(session)
            return _text("removed extra" if present else "added extra")
        if name == "vanish":
            self.tools = [t for t in self.tools if t["name"] != "vanish"]
            await self.announce(session)
            return _text("gone")
        if name == "structured":
            return {"content": [{"type": "text", "text": "n is 3"}], "structuredContent": {"n": 3}}
        return _text(f"{name} ok")


def _text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def generated(i: int) -> dict[str, Any]:
    """The ``i``-th generated tool: about 1.1 KB of definition, like a verbose real tool."""
    schema = {"type": "object", "properties": GENERATED_PROPERTIES}
    return {"name": f"generated_{i:05d}", "description": GENERATED_DESCRIPTION, "inputSchema": schema}


def _write(arguments: dict[str, Any]) -> dict[str, Any]:
    with open(str(arguments["path"]), "w", encoding="utf-8") as f:
        f.write(str(arguments.get("text", "")))
    return _text("written")


def _peek(arguments: dict[str, Any]) -> dict[str, Any]:
    with open(str(arguments["path"]), encoding="utf-8") as f:
        return _text(f.read())


SIZES: dict[str, Callable[[int], dict[str, Any]]] = {
    "big": lambda size: _text("x" * size),
    "many": lambda count: {"content": [{"type": "text", "text": f"item {i}"} for i in range(count)]},
}
SIZE_ARGUMENT = {"big": "bytes", "many": "count"}
FILES = {"write": _write, "peek": _peek}


RESOURCES: list[dict[str, Any]] = [
    {"uri": "memo://notes", "name": "notes", "description": "Meeting notes.", "mimeType": "text/plain"},
    {"uri": "memo://logo.png", "name": "logo", "mimeType": "image/png"},
]
TEMPLATES: list[dict[str, Any]] = [{"uriTemplate": "memo://notes/{day}", "name": "notes-of-day"}]
CONTENTS: dict[str, dict[str, Any]] = {
    "memo://notes": {"uri": "memo://notes", "mimeType": "text/plain", "text": "Ship on Friday."},
    "memo://logo.png": {"uri": "memo://logo.png", "mimeType": "image/png", "blob": PNG_1PX},
}
PROMPTS: list[dict[str, Any]] = [
    {
        "name": "review",
        "description": "Review the current change.",
        "arguments": [{"name": "focus", "description": "What to look at.", "required": True}],
    },
    {"name": "standup", "description": "Summarise yesterday's work."},
]


def resource_handlers() -> dict[str, Any]:
    """``resources/list`` (paged one resource a page), ``resources/templates/list`` and ``resources/read``."""
    import mcp_types as types
    from mcp import MCPError

    async def list_resources(ctx: Any, params: Any) -> Any:
        start = int(params.cursor) if params is not None and params.cursor else 0
        page: dict[str, Any] = {"resources": RESOURCES[start : start + 1]}
        if start + 1 < len(RESOURCES):
            page["nextCursor"] = str(start + 1)
        return types.ListResourcesResult.model_validate(page)

    async def list_templates(ctx: Any, params: Any) -> Any:
        return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": TEMPLATES})

    async def read_resource(ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        if uri.startswith("memo://notes/"):
            return types.ReadResourceResult.model_validate(
                {"contents": [{"uri": uri, "text": f"Notes of {uri[13:]}."}]}
            )
        if uri not in CONTENTS:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {uri}")
        return types.ReadResourceResult.model_validate({"contents": [CONTENTS[uri]]})

    return {
        "on_list_resources": list_resources,
        "on_list_resource_templates": list_templates,
        "on_read_resource": read_resource,
    }


def prompt_handlers() -> dict[str, Any]:
    """``prompts/list`` and ``prompts/get`` (``review`` needs ``focus``)."""
    import mcp_types as types
    from mcp import MCPError

    async def list_prompts(ctx: Any, params: Any) -> Any:
        return types.ListPromptsResult.model_validate({"prompts": PROMPTS})

    async def get_prompt(ctx: Any, params: Any) -> Any:
        arguments = params.arguments or {}
        if params.name == "review":
            if "focus" not in arguments:
                raise MCPError(code=types.INVALID_PARAMS, message="missing argument focus")
            text = f"Review the change, looking hard at {arguments['focus']}."
        elif params.name == "standup":
            text = "Summarise what was done yesterday."
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt {params.name}")
        message = {"role": "user", "content": {"type": "text", "text": text}}
        return types.GetPromptResult.model_validate({"description": "from the test server", "messages": [message]})

    return {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}


def build(args: argparse.Namespace) -> Any:
    """The lowlevel ``Server`` with this script's behaviour."""
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

    behaviour = Behaviour(args)
    instructions = args.instructions
    if args.instructions_bytes:
        instructions = "i" * args.instructions_bytes

    async def list_tools(ctx: Any, params: Any) -> Any:
        cursor = params.cursor if params is not None else None
        return types.ListToolsResult.model_validate(behaviour.listing(cursor))

    async def call_tool(ctx: Any, params: Any) -> Any:
        return await behaviour.call(params.name, params.arguments or {}, ctx)

    async def lie(ctx: Any, call_next: Any) -> Any:
        params = ctx.params or {}
        if ctx.method == "tools/call" and params.get("name") == "lie":
            return {"content": "not a list", "isError": "sometimes"}
        return await call_next(ctx)

    handlers: dict[str, Any] = {} if args.no_tools else {"on_list_tools": list_tools, "on_call_tool": call_tool}
    if not args.no_resources:
        handlers |= resource_handlers() | prompt_handlers()
    server = Server("pydsh-test-server", version="1.0", instructions=instructions, **handlers)
    server.middleware.insert(0, lie)
    return server


async def serve_stdio(server: Any) -> None:
    """Serve on stdout (kept as ``WIRE``, so ``noise`` can write past the protocol layer)."""
    import anyio
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    wire = io.TextIOWrapper(os.fdopen(WIRE, "wb", closefd=False), encoding="utf-8")
    async with stdio_server(stdout=anyio.wrap_file(wire)) as (read, write):
        await server.run(read, write, options)


def sse_app(server: Any) -> Any:
    """The legacy SSE transport: ``GET /sse`` opens the event stream, messages are POSTed to ``/messages/``."""
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    transport = SseServerTransport("/messages/")
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))

    async def handle_sse(request: Any) -> Any:
        async with transport.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, options)
        return Response()

    return Starlette(
        routes=[Route("/sse", handle_sse, methods=["GET"]), Mount("/messages/", transport.handle_post_message)]
    )


def logged(app: Any, path: str) -> Any:
    """``app`` appending ``<METHOD> <path>`` of every HTTP request to the file ``path``."""

    async def log_request(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"{scope['method']} {scope['path']}\n")
        await app(scope, receive, send)

    return log_request


async def serve_http(server: Any, args: argparse.Namespace) -> None:
    """Serve streamable HTTP (or the legacy SSE transport) on a loopback port printed as ``PORT <n>``."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # before the port is printed: a client connecting at once is queued, not refused
    app = sse_app(server) if args.sse else server.streamable_http_app()
    if args.request_log:
        app = logged(app, args.request_log)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.fail_if_exists and os.path.exists(args.fail_if_exists):
        print("refusing to start", file=sys.stderr)
        return 3
    print(f"test server {os.getpid()} starting", file=sys.stderr, flush=True)
    if args.orphan_pidfile:
        orphan = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        with open(args.orphan_pidfile, "w") as f:
            f.write(str(orphan.pid))
    server = build(args)
    time.sleep(args.start_delay)
    asyncio.run(serve_http(server, args) if args.http or args.sse else serve_stdio(server))
    return 0


if __name__ == "__main__":
    sys.exit(main())
