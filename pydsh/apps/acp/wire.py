"""Pure pieces of the ACP bridge: errors, frame checks, prompt admission, updates, listing (spec 11 Part A).

Imported only when the ``acp`` row activates (it needs the ``agent-client-protocol`` package).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from acp import RequestError
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
)

from pydsh.apps.acp.toolcalls import present
from pydsh.session.events import Event, thaw
from pydsh.tools.mcp import normalize_server_name

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
StopReason = Literal["end_turn", "max_tokens", "cancelled"]
STOP_REASONS: dict[str, StopReason] = {
    "completed": "end_turn",
    "max-tokens": "max_tokens",
    "aborted": "end_turn",
    "interrupted": "cancelled",
    "blocked": "end_turn",
}


def invalid(detail: str) -> RequestError:
    """A caller-correctable problem: ``-32602`` with the detail in the message and in ``data``."""
    return RequestError(INVALID_PARAMS, f"Invalid params: {detail}", {"detail": detail})


def internal(detail: str) -> RequestError:
    """A failure of the bridge or the agent: ``-32603`` with the detail in the message and in ``data``."""
    return RequestError(INTERNAL_ERROR, f"Internal error: {detail}", {"detail": detail})


def error_frame(rid: object, code: int, message: str, detail: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message, "data": {"detail": detail}}}


def frame_problem(message: object) -> tuple[bool, object, str] | None:
    """``(answer?, id, detail)`` when a decoded frame is no JSON-RPC 2.0 message the library can route.

    Requests and unidentifiable frames are answered; a malformed notification is only logged.
    """
    if not isinstance(message, dict):
        return True, None, "a JSON-RPC message must be an object"
    rid = message.get("id")
    valid_id = rid is None or (isinstance(rid, (str, int)) and not isinstance(rid, bool))
    answer = rid if valid_id else None
    request = "id" in message
    if "method" not in message:
        if request and ("result" in message or "error" in message):
            return None
        return True, answer, "a JSON-RPC message needs a method, or an id with a result or an error"
    if message.get("jsonrpc") != "2.0":
        return request, answer, 'jsonrpc must be "2.0"'
    if not isinstance(message["method"], str):
        return request, answer, "method must be a string"
    if not valid_id:
        return True, None, "id must be a string, an integer or null"
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return request, answer, "params must be an object"
    return None


# -- paths -----------------------------------------------------------------------------------


def absolute_cwd(cwd: str) -> str:
    if not os.path.isabs(cwd):
        raise invalid(f"cwd must be an absolute path: {cwd}")
    return cwd


def same_directory(a: str, b: str) -> bool:
    """Whether two paths name the same directory: their real paths, else (one is missing) lexically."""
    try:
        return os.path.realpath(a, strict=True) == os.path.realpath(b, strict=True)
    except OSError:
        return os.path.normpath(a) == os.path.normpath(b)


# -- prompts ---------------------------------------------------------------------------------


def admit_prompt(blocks: Sequence[Any]) -> str | list[dict[str, Any]]:
    """The one user message of an ACP prompt (spec 11 §A.4 step 2): its text, or content blocks when it carries
    images (each text run one block, the images inline in order); unsupported blocks are invalid."""
    out: list[dict[str, Any]] = []
    run: list[str] = []
    for block in blocks:
        kind = block.type
        if kind == "text":
            run.append(block.text)
        elif kind == "resource_link":
            name, uri = json.dumps(block.name, ensure_ascii=False), json.dumps(block.uri, ensure_ascii=False)
            run.append(f"\n[resource_link name={name} uri={uri}]\n")
        elif kind == "image":
            if not block.data:
                raise invalid("image prompt content must carry its data inline")
            out += _text(run)
            out.append({"type": "image", "data": block.data, "mimeType": block.mime_type})
            run = []
        elif kind == "audio":
            raise invalid("audio prompt content is not supported")
        else:
            raise invalid("embedded resource prompt content is not supported")
    out += _text(run)
    if not out:
        raise invalid("empty prompt")
    return out[0]["text"] if len(out) == 1 and out[0]["type"] == "text" else out


def _text(run: list[str]) -> list[dict[str, Any]]:
    """A run of text and links as one text block (none when it is blank)."""
    text = "".join(run)
    return [{"type": "text", "text": text}] if text.strip() else []


# -- session updates -------------------------------------------------------------------------


def assistant_updates(event: Event) -> list[AgentThoughtChunk | AgentMessageChunk]:
    """Thought and message chunks of an ``assistant/message``, block by block (tool calls skipped)."""
    message = event["data"]["message"]
    message_id = message.get("id")
    out: list[AgentThoughtChunk | AgentMessageChunk] = []
    for block in message["content"]:
        text = block.get("text")
        if not isinstance(text, str) or not text:
            continue
        content = TextContentBlock(type="text", text=text)
        if block["type"] == "reasoning":
            out.append(AgentThoughtChunk(session_update="agent_thought_chunk", message_id=message_id, content=content))
        elif block["type"] == "text":
            out.append(AgentMessageChunk(session_update="agent_message_chunk", message_id=message_id, content=content))
    return out


def tool_call_update(event: Event, cwd: str) -> ToolCallStart:
    """The ``tool_call`` of a ``tool/call``: its ACP kind, a title and the files it touches (``toolcalls``)."""
    data = event["data"]
    try:
        raw_input: Any = json.loads(data["arguments"])
    except ValueError:
        raw_input = data["arguments"]
    shown = present(data["name"], raw_input, cwd)
    locations = [ToolCallLocation(path=path, line=line) for path, line in shown.locations]
    return ToolCallStart(
        session_update="tool_call",
        tool_call_id=data["callId"],
        title=shown.title,
        kind=shown.kind,
        status="in_progress",
        raw_input=raw_input,
        locations=locations or None,
    )


def tool_result_update(event: Event) -> ToolCallProgress:
    message = event["data"]["message"]
    content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] = [
        ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=block["text"]))
        for block in message["content"]
        if block.get("type") == "text" and block.get("text")
    ]
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=message["toolCallId"],
        status="failed" if message.get("isError") else "completed",
        content=content,
    )


def stop_reason(kind: str | None) -> StopReason:
    """The ACP stop reason of a turn's finish reason (``None``: the prompt never ran, so it was cancelled)."""
    if kind is None:
        return "cancelled"
    return STOP_REASONS.get(kind, "end_turn")


# -- MCP servers declared by the client ------------------------------------------------------

HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def mcp_configs(servers: Sequence[Any], cwd: str) -> list[dict[str, Any]]:
    """MCP client configs (spec 11 §B.1) of a session's ``mcpServers``; any problem is invalid (§A.8)."""
    configs: list[dict[str, Any]] = []
    for i, server in enumerate(servers):
        kind = getattr(server, "type", None) or "stdio"
        if kind == "stdio":
            config = _stdio_config(i, server, cwd)
        elif kind == "http":
            config = _http_config(i, server)
        else:
            raise invalid(f"mcpServers[{i}] transport {kind} is not supported")
        try:
            config["serverName"] = normalize_server_name(server.name)
        except ValueError:
            raise invalid("mcpServers contains an invalid server name") from None
        configs.append({**config, "failOnStartupError": True})
    names = [c["serverName"] for c in configs]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise invalid(f"mcpServers contains duplicate normalized name: {duplicate}")
    return configs


def _stdio_config(i: int, server: Any, cwd: str) -> dict[str, Any]:
    if not os.path.isabs(server.command):
        raise invalid(f"mcpServers[{i}].command must be an absolute path")
    env = _pairs(i, "env", server.env, _valid_env)
    return {"transport": "stdio", "command": server.command, "args": list(server.args), "env": env, "cwd": cwd}


def _http_config(i: int, server: Any) -> dict[str, Any]:
    url = urlsplit(server.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise invalid(f"mcpServers[{i}].url must be an absolute HTTP(S) URL")
    headers = _pairs(i, "headers", server.headers, _valid_header, fold=True)
    return {"transport": "streamable-http", "url": server.url, "headers": headers}


def _valid_env(name: str, value: str) -> bool:
    return bool(name) and "=" not in name and "\0" not in name and "\0" not in value


def _valid_header(name: str, value: str) -> bool:
    return bool(HEADER_NAME.match(name)) and not any(c in value for c in "\r\n\0")


def _pairs(i: int, key: str, entries: Sequence[Any], valid: Any, fold: bool = False) -> dict[str, str]:
    """``[{name, value}]`` as a mapping: invalid entries and duplicate names (case-folded for headers) refused."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for entry in entries:
        if not valid(entry.name, entry.value):
            raise invalid(
                f"mcpServers[{i}].{key} contains an invalid {'environment' if key == 'env' else 'header'} entry"
            )
        folded = entry.name.lower() if fold else entry.name
        if folded in seen:
            raise invalid(f"mcpServers[{i}].{key} contains duplicate name: {entry.name}")
        seen.add(folded)
        out[entry.name] = entry.value
    return out


# -- session/list ----------------------------------------------------------------------------


def encode_cursor(created_at: int, session_id: str) -> str:
    raw = json.dumps([created_at, session_id], separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``(createdAt, sessionId)`` of a cursor this bridge issued; anything else is invalid."""
    bad = invalid("session/list cursor is invalid")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, binascii.Error):
        raise bad from None
    ok = isinstance(value, list) and len(value) == 2 and type(value[0]) is int and isinstance(value[1], str)
    if not ok or encode_cursor(value[0], value[1]) != cursor:
        raise bad
    return value[0], value[1]


def listing_key(created_at: int, session_id: str) -> tuple[int, bytes]:
    """Sort key of ``session/list``: ``createdAt`` descending, then id by UTF-8 bytes ascending."""
    return -created_at, session_id.encode("utf-8", "surrogatepass")


def listable(header: dict[str, Any]) -> bool:
    """A persisted top-level session with an absolute cwd (no subagent, no child of another session)."""
    cwd = header.get("cwd")
    return (
        header.get("origin") != "subagent"
        and header.get("parentSession") is None
        and isinstance(cwd, str)
        and os.path.isabs(cwd)
        and type(header.get("createdAt")) is int
        and isinstance(header.get("id"), str)
    )


def resume_problem(header: dict[str, Any]) -> bool:
    """Whether a stored header cannot be resumed through ACP (a subagent or a fork)."""
    return header.get("origin") == "subagent" or header.get("parentSession") is not None or bool(header.get("isSeeded"))


def logged_route(header: dict[str, Any] | None) -> tuple[str, str, str | None] | None:
    """Provider, model and (unless the adapter filled it in) effort of a logged ``request/header``."""
    if header is None:
        return None
    config = thaw(header["config"])
    defaults = header.get("adapterDefaults") or {}
    effort = None if defaults.get("reasoningEffort") else config.get("reasoningEffort")
    return str(config["provider"]), str(config["model"]), effort
