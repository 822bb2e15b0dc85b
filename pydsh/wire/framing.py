"""Newline-delimited JSON frames, as the stdio protocols carry them (the SDK wire and ACP) — one module for
the SDK client and both servers: encode, split a byte stream into bounded lines, parse a bounded value.

Parsing is bounded in size (the splitter's line limit) and in nesting depth, so no frame a peer sends —
however deep — can exhaust the interpreter's recursion limit in the parser or in the code that reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydsh.kernel.errors import PydshError

MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 100
"""Deepest nesting of arrays and objects a frame may have (requests of both protocols use fewer than 10)."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class FrameError(PydshError, ValueError):
    """A line that is not one JSON value within the bounds; ``str(exc)`` names the problem."""


class FrameTooDeep(FrameError):
    """A line that is JSON but nests arrays and objects deeper than :data:`MAX_DEPTH`."""


def encode_frame(frame: dict[str, Any]) -> bytes:
    """One compact UTF-8 frame plus ``\\n``; lone surrogates become ``\\udXXX`` escapes like ``JSON.stringify``."""
    text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        escaped = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", paired)
        return (escaped + "\n").encode("utf-8")


class LineSplitter:
    """Cuts a byte stream into lines; a line over ``limit`` bytes is dropped and reported once."""

    def __init__(self, on_overflow: Callable[[int], None], limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._on_overflow = on_overflow
        self._buf = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes (without their ``\\n``)."""
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            start = end + 1
            if self._discarding:
                self._discarding = False
            elif len(self._buf) + len(piece) > self.limit:
                self._on_overflow(self.limit)
            else:
                self._buf += piece
                lines.append(bytes(self._buf))
            self._buf.clear()
        rest = chunk[start:]
        if not self._discarding:
            if len(self._buf) + len(rest) > self.limit:
                self._discarding = True
                self._buf.clear()
                self._on_overflow(self.limit)
            else:
                self._buf += rest
        return lines

    def finish(self) -> list[bytes]:
        """The unterminated last line at end of input, if any."""
        tail = bytes(self._buf)
        self._buf.clear()
        return [tail] if tail and not self._discarding else []


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_frame(line: bytes) -> Any:
    """The JSON value of one non-blank line; ``FrameError`` when it is not JSON or nests deeper than
    :data:`MAX_DEPTH` (bytes that are not UTF-8 read as U+FFFD)."""
    text = line.decode("utf-8", "replace")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise FrameTooDeep(f"the frame nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise FrameError(f"the frame is not valid JSON: {exc}") from None
    if _too_deep(value):
        raise FrameTooDeep(f"the frame nests deeper than {MAX_DEPTH} levels")
    return value


def decode_line(line: bytes) -> Any:
    """The JSON value of one inbound line, or ``None`` for a blank, unparsable or too deep line (ignored)."""
    if not line.strip():
        return None
    try:
        return parse_frame(line)
    except FrameError:
        return None


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests arrays and objects more than :data:`MAX_DEPTH` deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item if type(item) is list else None
        if children is None:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children if type(child) in (dict, list))
    return False
