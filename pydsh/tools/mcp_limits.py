"""What an MCP server can make pydsh hold or send: message size, tool lists and tool results.

A server is outside pydsh's control, so its output is bounded before it is believed. One message
(a line on stdio, a body or event over HTTP) holds at most ``maxMessageBytes``. A message of
:data:`LARGE_MESSAGE_BYTES` or more is not handed to the ``mcp`` package whole (its parse costs
about 36 times the text for small items): :func:`bound_message` walks it item by item, projecting
a result's content into one text block (refused past ``maxResultBytes``) and keeping only the
tools that fit the tool budget. Anything refused becomes a :class:`Refusal` that answers the
request it belongs to with one clear line instead of leaving it to time out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydsh.kernel.errors import PydshError

MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""Default of ``maxMessageBytes``: the largest message read from a server; a longer one is never held."""
LARGE_MESSAGE_BYTES = 1024 * 1024
"""From this size on a message is walked item by item instead of parsed whole."""
DROPPED_META = "pydsh/droppedTools"
"""``_meta`` key of a walked ``tools/list`` page: the raw names it left out."""
REFUSAL_DATA = "pydsh/refusal"
"""``error.data`` key marking an error pydsh answered on the server's behalf (value: the error code)."""
NAMED_DROPS = 10
"""How many dropped tools the warning names before it only counts the rest."""


def size_text(n: int) -> str:
    """``n`` bytes for people: ``30,000,073 bytes``."""
    return f"{n:,} bytes"


# -- refusals -----------------------------------------------------------------------------------


class Refusal(PydshError):
    """A message pydsh would not accept; ``text`` completes ``<tool "x" | tools/list> …``.

    ``message_id`` and ``response`` say which request it answers: ``response`` is ``False`` for a server
    request or notification and ``None`` when the message did not show which it is.
    """

    def __init__(
        self, text: str, code: str = "MCP_INVALID_RESULT", message_id: Any = None, response: bool | None = None
    ) -> None:
        super().__init__(text)
        self.text = text
        self.code = code
        self.message_id = message_id
        self.response = response

    def error_data(self) -> dict[str, Any]:
        """The JSON-RPC error that answers the refused response's request."""
        return {"code": -32603, "message": self.text, "data": {REFUSAL_DATA: self.code}}


def refusal_code(data: Any) -> str | None:
    """The code of an error pydsh answered itself (see :meth:`Refusal.error_data`), else ``None``."""
    code = data.get(REFUSAL_DATA) if isinstance(data, Mapping) else None
    return code if isinstance(code, str) else None


def oversized(size: int, limit: int) -> Refusal:
    """A message past ``maxMessageBytes``, refused without being held."""
    return Refusal(
        f"returned a message of {size_text(size)}; the limit of one message is {size_text(limit)} (maxMessageBytes)",
        "MCP_RESULT_TOO_LARGE",
    )


def too_much_content(size: int, limit: int) -> Refusal:
    """A result whose projected content is past ``maxResultBytes``."""
    return Refusal(
        f"returned {size_text(size)} of content; the limit is {size_text(limit)} (maxResultBytes)",
        "MCP_RESULT_TOO_LARGE",
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_problem(text: str) -> Refusal | None:
    """A refusal when ``text`` holds a lone UTF-16 surrogate (no UTF-8 form, so it can be neither logged nor sent)."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    if found is None:
        return None
    return Refusal(
        f"returned text with a lone UTF-16 surrogate (\\u{ord(found.group()):04x}), which is not valid Unicode"
    )


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def surrogate_escaped(data: bytes) -> Refusal | None:
    """A refusal when the JSON text ``data`` escapes a lone surrogate, which the ``mcp`` package would only
    report as a parse failure of the whole message."""
    if _SURROGATE_ESCAPE.search(data) is None:
        return None
    try:
        message = json.loads(data)
    except ValueError:
        return None
    problem = _strings_problem(message)
    return _with_id(problem, message) if problem is not None else None


def diagnose(line: bytes | str) -> Refusal:
    """Why a message the ``mcp`` package could not parse is bad, with the id of the request it answers."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _located(Refusal(f"returned bytes that are not valid UTF-8 (at byte {exc.start:,})"), line)
    try:
        message = json.loads(line)
    except ValueError as exc:
        return _located(Refusal(f"returned a message that is not valid JSON ({exc})"), line)
    problem = _strings_problem(message)
    if problem is None:
        problem = Refusal("returned a message that is not valid JSON-RPC")
    return _with_id(problem, message)


def _strings_problem(value: Any) -> Refusal | None:
    """A refusal when a decoded value holds a lone surrogate anywhere (no UTF-8 form)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return unicode_problem(str(exc.object)[exc.start : exc.end])
    return None


def _with_id(refusal: Refusal, message: Any) -> Refusal:
    """``refusal`` for the decoded ``message``: its id, and whether it is a response."""
    if not isinstance(message, dict) or "method" in message:
        return Refusal(refusal.text, refusal.code, response=False)
    answers = "result" in message or "error" in message
    return Refusal(refusal.text, refusal.code, message.get("id"), True if answers else None)


_ID = r'(-?\d+|"(?:[^"\\]|\\.)*")'
_HEAD = re.compile(
    rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?(?:"id"\s*:\s*' + _ID.encode() + rb'\s*,\s*)?"(result|error|method)"'
)
_TAIL = re.compile(rb'[,{]\s*"id"\s*:\s*' + _ID.encode() + rb"\s*\}\s*$")
EDGE_BYTES = 512
"""How much of a message's start and end is kept to find the request id of a refused message."""


def _located(refusal: Refusal, line: bytes | str) -> Refusal:
    """``refusal`` with the request id read from the ends of an undecodable ``line``."""
    raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
    return locate(refusal, raw[:EDGE_BYTES], raw[-EDGE_BYTES:])


def locate(refusal: Refusal, head: bytes, tail: bytes) -> Refusal:
    """``refusal`` with the id of the response whose first and last bytes are ``head`` and ``tail``, when they show it.

    Fits the member orders servers write: ``{"jsonrpc","id","result"…}`` and ``{"result"…,"jsonrpc","id"}``.
    """
    start = _HEAD.match(head)
    if start is None:
        return Refusal(refusal.text, refusal.code)
    if start.group(2) == b"method":
        return Refusal(refusal.text, refusal.code, response=False)
    found = start.group(1)
    if found is None:
        end = _TAIL.search(tail)
        found = end.group(1) if end is not None else None
    return Refusal(refusal.text, refusal.code, json.loads(found) if found is not None else None, True)


# -- the tool budget ----------------------------------------------------------------------------


def definition_bytes(name: str, description: str, parameters: Any) -> int:
    """The UTF-8 size of one tool definition as the model is sent it (compact JSON)."""
    definition = {"name": name, "description": description, "parameters": parameters}
    return len(json.dumps(definition, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


@dataclass
class ToolBudget:
    """The first tools in listed order that fit ``max_tools`` and ``max_bytes``; once one does not fit, none after it.

    Keeping a prefix makes the cut the same whether it is applied per page or to the whole list.
    """

    max_tools: int
    max_bytes: int
    kept: int = 0
    used: int = 0
    dropped: list[str] = field(default_factory=list)

    def admit(self, name: str, size: int) -> bool:
        """Whether the tool ``name`` of ``size`` bytes is kept (a dropped one is remembered)."""
        if self.dropped or self.kept >= self.max_tools or self.used + size > self.max_bytes:
            self.dropped.append(name)
            return False
        self.kept += 1
        self.used += size
        return True

    def warning(self, label: str) -> str:
        """The one warning naming what was dropped."""
        named = ", ".join(self.dropped[:NAMED_DROPS])
        more = len(self.dropped) - NAMED_DROPS
        rest = f" and {more:,} more" if more > 0 else ""
        return (
            f"{label}: kept the first {self.kept:,} of {self.kept + len(self.dropped):,} tools "
            f"(maxTools {self.max_tools:,}, maxToolDefinitionBytes {self.max_bytes:,}); dropped {named}{rest}"
        )


# -- results ------------------------------------------------------------------------------------


def _media(item: Mapping[str, Any]) -> str:
    mime = item.get("mimeType")
    return mime if isinstance(mime, str) and mime else "unknown media type"


def project_item(item: Any) -> str:
    """The model text of one MCP content item (spec 11 §B.5)."""
    if not isinstance(item, Mapping):
        return "[unsupported MCP content block: expected an object]"
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind == "resource_link":
        name, uri = item.get("name"), item.get("uri")
        if not name or not uri:
            return "[resource link unavailable: the MCP block is missing its name or URI]"
        return f"Resource link: {name} ({uri})"
    if kind == "image":
        return (
            f"[image unavailable: {_media(item)}; no attachment store is mounted; "
            "raw image data remains available to programmatic callers]"
        )
    if kind == "audio":
        return f"[audio result unsupported: {_media(item)}; raw audio data remains available to programmatic callers]"
    if kind == "resource":
        return "[embedded resource unsupported; raw resource data remains available to programmatic callers]"
    return f"[unsupported MCP content type: {kind}]"


def project_content(raw_name: str, items: Sequence[Any]) -> str:
    """The whole result as one text: projected items joined by newlines, or a note that it is empty."""
    if not items:
        return f"({raw_name} returned no model-visible content)"
    return "\n".join(project_item(item) for item in items)


class ResultText:
    """A result's projected items joined by newlines, refused (and no longer held) past ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = -1
        self.parts: list[str] | None = []

    def add(self, piece: str) -> None:
        """Append one projected item; past the limit only its size is counted."""
        self.size += 1 + (len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass")))
        if self.parts is None:
            return
        if self.size > self.limit:
            self.parts = None
            return
        self.parts.append(piece)

    def text(self) -> str:
        """The joined text; raises :class:`Refusal` when it grew past the limit or is not valid Unicode."""
        if self.parts is None:
            raise too_much_content(self.size, self.limit)
        joined = "\n".join(self.parts)
        problem = unicode_problem(joined)
        if problem is not None:
            raise problem
        return joined


# -- walking a large message --------------------------------------------------------------------


@dataclass(frozen=True)
class Bounds:
    """What one message may hold, and what a walked one may keep: the result budget and a fresh tool budget per page."""

    max_message_bytes: int
    max_result_bytes: int
    tool_budget: Callable[[], ToolBudget]
    measure: Callable[[str, str, Any], int]
    content_block: Callable[[Any], Mapping[str, Any]]
    """The validated, dumped form of one content item (raises ``ValueError`` for an invalid one)."""


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SCALAR = re.compile(r"[^,\]}\s]+")


class _Walk:
    """A cursor over one JSON text that decodes values one at a time (stdlib ``json`` only)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def space(self) -> str:
        """Skip whitespace; the next character (empty at the end)."""
        self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]
        return self.text[self.pos : self.pos + 1]

    def expect(self, char: str) -> None:
        """Step over ``char`` after whitespace, or fail naming the position."""
        if self.space() != char:
            raise ValueError(f"expected {char!r} at character {self.pos:,}")
        self.pos += 1

    def value(self) -> Any:
        """Decode the value at the cursor."""
        self.space()
        value, self.pos = _DECODER.raw_decode(self.text, self.pos)
        return value

    def skip(self) -> int:
        """Step over the value at the cursor without decoding it; returns its length in characters."""
        start, depth = self.pos, 0
        while True:
            char = self.space()
            if char == '"':
                self.pos = _end(_STRING.match(self.text, self.pos))
            elif char in ("[", "{"):
                depth, self.pos = depth + 1, self.pos + 1
            elif char in ("]", "}"):
                depth, self.pos = depth - 1, self.pos + 1
            elif char in (",", ":"):
                self.pos += 1
                continue
            else:
                self.pos = _end(_SCALAR.match(self.text, self.pos))
            if depth <= 0:
                return self.pos - start

    def members(self) -> Iterator[str]:
        """The keys of the object at the cursor; the caller consumes each value before the next key."""
        self.expect("{")
        if self.space() == "}":
            self.pos += 1
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise ValueError(f"expected a member name at character {self.pos:,}")
            self.expect(":")
            yield key
            if self.space() == "}":
                self.pos += 1
                return
            self.expect(",")

    def items(self) -> Iterator[None]:
        """One step per element of the array at the cursor; the caller consumes each element."""
        self.expect("[")
        if self.space() == "]":
            self.pos += 1
            return
        while True:
            yield None
            if self.space() == "]":
                self.pos += 1
                return
            self.expect(",")


def _end(match: re.Match[str] | None) -> int:
    """Where a token the walker matched ends; a mismatch is malformed JSON."""
    if match is None:
        raise ValueError("malformed JSON value")
    return match.end()


def bound_message(text: str, bounds: Bounds) -> dict[str, Any]:
    """A large message as a JSON-RPC object with bounded content: a result's items projected into one text
    block, a tool page cut to the tool budget (the names it left out under ``_meta``).

    Raises :class:`Refusal` (with the request id when known) for a message that cannot be kept.
    """
    walk = _Walk(text)
    message: dict[str, Any] = {}
    key = ""
    try:
        for key in walk.members():
            if key == "result" and walk.space() == "{":
                message[key] = _result(walk, bounds)
            else:
                message[key] = _small(walk, bounds, key)
        if walk.space():
            raise ValueError(f"extra data at character {walk.pos:,}")
    except Refusal as refusal:
        raise _answering(refusal, message, key, text) from None
    except (ValueError, IndexError) as exc:
        raise _located(Refusal(f"returned a message that is not valid JSON ({exc})"), text) from None
    if "method" in message:
        raise Refusal(
            f"sent a {message['method']!r} message of {size_text(len(text))}; messages other than responses "
            f"are read only up to {size_text(LARGE_MESSAGE_BYTES)}",
            response=False,
        )
    return message


def _answering(refusal: Refusal, message: dict[str, Any], key: str, text: str) -> Refusal:
    """``refusal`` of a message walked up to ``key``, with the request it answers (its id may come last)."""
    if "method" in message:
        return Refusal(refusal.text, refusal.code, response=False)
    if key not in ("result", "error") and not {"result", "error"} & message.keys():
        return _located(refusal, text)
    if "id" in message:
        return Refusal(refusal.text, refusal.code, message["id"], True)
    return _located(refusal, text)


def _small(walk: _Walk, bounds: Bounds, key: str) -> Any:
    """A member that is not walked item by item, refused when it alone is larger than a result may be."""
    start = walk.pos
    length = walk.skip()
    if length > bounds.max_result_bytes:
        limit = size_text(bounds.max_result_bytes)
        raise Refusal(f'returned a "{key}" of {size_text(length)}; the limit is {limit} (maxResultBytes)')
    walk.pos = start
    value = walk.value()
    problem = _strings_problem(value)
    if problem is not None:
        raise problem
    return value


def _result(walk: _Walk, bounds: Bounds) -> dict[str, Any]:
    """A response's ``result``: ``content`` and ``tools`` walked item by item, the rest bounded whole."""
    result: dict[str, Any] = {}
    for key in walk.members():
        if key == "content" and walk.space() == "[":
            result[key] = _content(walk, bounds)
        elif key == "tools" and walk.space() == "[":
            result[key], dropped = _tools(walk, bounds)
            if dropped:
                result["_meta"] = {**(result.get("_meta") or {}), DROPPED_META: dropped}
        else:
            result[key] = _small(walk, bounds, key)
    return result


def _content(walk: _Walk, bounds: Bounds) -> list[dict[str, Any]]:
    """The content items projected into one text block (none for an empty list)."""
    assembled = ResultText(bounds.max_result_bytes)
    count = 0
    for _ in walk.items():
        item = walk.value()
        try:
            block = bounds.content_block(item)
        except ValueError as exc:
            raise Refusal(f"returned an invalid MCP result: content.{count}: {_first_line(exc)}") from None
        assembled.add(project_item(block))
        count += 1
    return [{"type": "text", "text": assembled.text()}] if count else []


def _tools(walk: _Walk, bounds: Bounds) -> tuple[list[Any], list[str]]:
    """A tool page cut to a fresh tool budget: the kept tools and the names left out."""
    budget = bounds.tool_budget()
    kept: list[Any] = []
    for _ in walk.items():
        tool = walk.value()
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            kept.append(tool)
            continue
        description = tool.get("description") if isinstance(tool.get("description"), str) else ""
        size = bounds.measure(tool["name"], str(description), tool.get("inputSchema"))
        if budget.admit(tool["name"], size):
            kept.append(tool)
    problem = _strings_problem(kept)
    if problem is not None:
        raise problem
    return kept, budget.dropped


def _first_line(exc: Exception) -> str:
    """The first problem of a validation error as ``where: what``."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))
    return str(exc).splitlines()[0]
