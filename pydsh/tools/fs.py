"""The ``read``, ``write`` and ``edit`` tools (spec 05 §4.1–4.3).

Reads are never fenced (protected secrets aside, see ``protected.py``) and stream through their
window. Writes and edits pass the sandbox escalation check, the file fence and the read-before-write
observation policy (when composed), then replace the file atomically.
"""

from __future__ import annotations

import asyncio
import codecs
import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Any

from pydsh.agent.cwd import quote
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec, text
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.policy.keys import SANDBOX
from pydsh.tools.files import (
    ABSENT,
    MAX_HASHED,
    FsError,
    Gate,
    Rewrite,
    Snapshot,
    Version,
    canonical,
    decode_text,
    path_lock,
    resolve,
)
from pydsh.tools.protected import Protection, protection

MAX_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_BYTES = 51200
LINE_KEEP_BYTES = 4 * (MAX_LINE_CHARS + 2)
"""Bytes of a selected line kept while streaming: enough for 2001 characters of four bytes each."""
READ_CHUNK = 1 << 20

SANDBOX_PROPERTIES = {
    "sandbox_permissions": {
        "type": "string",
        "description": (
            "Only for retrying, once, the exact operation the sandbox just denied: the narrowest wider sandbox "
            "mode that would allow it. The retry asks the user for approval."
        ),
        "enum": ["workspace-write", "danger-full-access"],
    },
    "justification": {
        "type": "string",
        "description": (
            "Needed with sandbox_permissions: a single sentence telling the user why this exact file operation "
            "needs wider access, written in the language of the user’s current request."
        ),
    },
}

READ = {
    "type": "object",
    "properties": {
        "file_path": {
            "type": "string",
            "description": "File to read; a relative path resolves against the current working directory.",
        },
        "offset": {"type": "number", "description": "Line number (1-based) to start reading from. Default 1."},
        "limit": {"type": "number", "description": "How many lines to return at most. Default 2000."},
    },
    "required": ["file_path"],
}


def write_parameters(sandboxed: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "file_path": {
            "type": "string",
            "description": (
                "File to write; a relative path resolves against the current working directory. "
                "Put `file_path` ahead of `content` in the arguments."
            ),
        },
        "content": {"type": "string", "description": "The complete UTF-8 text the file should contain."},
    }
    if sandboxed:
        properties.update(SANDBOX_PROPERTIES)
    return {"type": "object", "properties": properties, "required": ["file_path", "content"]}


def edit_parameters(sandboxed: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "file_path": {
            "type": "string",
            "description": (
                "File to edit; a relative path resolves against the current working directory. "
                "Put `file_path` ahead of `old_string` and `new_string` in the arguments."
            ),
        },
        "old_string": {"type": "string", "description": "Exact text to find, matched literally (not a pattern)."},
        "new_string": {
            "type": "string",
            "description": "Text to put in its place; an empty string deletes the match.",
        },
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence. Default false, in which case old_string must occur exactly once.",
        },
    }
    if sandboxed:
        properties.update(SANDBOX_PROPERTIES)
    return {"type": "object", "properties": properties, "required": ["file_path", "old_string", "new_string"]}


SECTIONS = {
    "read": (
        "tool:read",
        1100,
        "To look at text files, use the read tool rather than shell commands such as cat. "
        "Page through large files with offset and limit.",
    ),
    "write": (
        "tool:write",
        1200,
        "Read an existing file before replacing it with write (the default fs-observation-policy enforces this); "
        "for targeted changes prefer edit.",
    ),
    "edit": (
        "tool:edit",
        1300,
        "Read a file before you edit it (the default fs-observation-policy enforces this), unless this session "
        "already created or edited it.",
    ),
}


def positive_int(value: Any) -> int | None:
    """``value`` as a positive integer (integral floats accepted), else ``None``."""
    if type(value) is int and value >= 1:
        return value
    if type(value) is float and value.is_integer() and value >= 1:
        return int(value)
    return None


def split_lines(content: str) -> list[str]:
    """Lines without terminators; a final newline starts no extra line and a trailing ``\\r`` is dropped."""
    if not content:
        return []
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def file_block(display: str, body: str) -> str:
    return f"<path>{display}</path>\n<type>file</type>\n<content>\n{body}\n</content>"


LANG_ALIASES = {"pyi": "py", "pyw": "py", "mjs": "js", "cjs": "js", "mts": "ts", "cts": "ts"}
"""Extensions that share a highlighting language with another (the golden log reads ``.pyi`` as ``py``)."""


def lang_of(path: str) -> str | None:
    ext = os.path.splitext(path)[1][1:].lower()
    return LANG_ALIASES.get(ext, ext) if ext.isalnum() else None


def stale(verb: str, display: str) -> FsError:
    return FsError(
        f"cannot {verb} {quote(display)}: file changed since it was read — re-read the file, then retry",
        "FS_STALE_VERSION",
    )


def not_observed(display: str) -> FsError:
    return FsError(
        f"cannot modify {quote(display)}: file has not been read — read the file, then retry", "FS_NOT_OBSERVED"
    )


class LineWindow:
    """The ``read`` window of a file fed chunk by chunk: selected lines, total lines, and binary detection.

    Memory stays bounded by the window: lines outside it are only counted, and a selected line keeps
    at most the bytes that can reach the 2000-character cut.
    """

    def __init__(self, offset: int, limit: int) -> None:
        self.offset = offset
        self.last = offset + limit - 1
        self.selected: list[dict[str, Any]] = []
        self.size = 0
        self.capped = False
        self.binary = False
        self.newlines = 0
        self.ends_with_newline = True
        self.line = bytearray()
        self.overflow = False
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")

    @property
    def total(self) -> int:
        return self.newlines + (0 if self.ends_with_newline else 1)

    def collecting(self) -> bool:
        return not self.capped and self.newlines + 1 <= self.last

    def feed(self, chunk: bytes) -> bool:
        """Take the next chunk; ``False`` once the file is known to be binary (reading can stop)."""
        if b"\0" in chunk:
            self.binary = True
            return False
        try:
            self._decoder.decode(chunk)
        except UnicodeDecodeError:
            self.binary = True
            return False
        pos = 0
        while pos < len(chunk) and self.collecting():
            end = chunk.find(b"\n", pos)
            number = self.newlines + 1
            if number >= self.offset:
                self._keep(chunk[pos : end if end >= 0 else len(chunk)])
            if end < 0:
                pos = len(chunk)
                break
            if number >= self.offset:
                self._select(number)
            self.newlines += 1
            pos = end + 1
        self.newlines += chunk.count(b"\n", pos)
        self.ends_with_newline = chunk.endswith(b"\n")
        return True

    def finish(self) -> None:
        """End of file: an unterminated last line counts, and a cut UTF-8 sequence at the very end is binary."""
        try:
            self._decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            self.binary = True
            return
        number = self.newlines + 1
        if not self.ends_with_newline and self.collecting() and number >= self.offset:
            self._select(number)

    def _keep(self, piece: bytes) -> None:
        room = LINE_KEEP_BYTES - len(self.line)
        if len(piece) > room:
            self.overflow = True
        self.line += piece[: max(room, 0)]

    def _select(self, number: int) -> None:
        if self.overflow:
            line = self.line.decode("utf-8", "ignore")
        else:
            line = self.line.decode("utf-8")
            line = line[:-1] if line.endswith("\r") else line
        self.line = bytearray()
        self.overflow = False
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f"... (line truncated to {MAX_LINE_CHARS} chars)"
        cost = len(line.encode("utf-8")) + (1 if self.selected else 0)
        if self.size + cost > MAX_BYTES:
            self.capped = True
            return
        self.size += cost
        self.selected.append({"number": number, "text": line})

    def render(self, display: str) -> tuple[str, dict[str, Any]]:
        """The result text and meta of spec 05 §4.1."""
        total = self.total
        selected = self.selected
        offset = self.offset
        end = selected[-1]["number"] if selected else offset - 1
        if self.capped:
            footer = f"(Output capped. Showing lines {offset}-{end}. Use offset={end + 1} to continue.)"
        elif end < total:
            footer = f"(Showing lines {offset}-{end} of {total}. Use offset={end + 1} to continue.)"
        else:
            footer = f"(End of file - total {total} lines)"
        numbered = "\n".join(f"{entry['number']}: {entry['text']}" for entry in selected)
        body = f"{numbered}\n\n{footer}" if selected else footer
        meta: dict[str, Any] = {"path": display, "offset": offset, "lines": selected, "totalLines": total}
        lang = lang_of(display)
        if lang:
            meta["lang"] = lang
        return file_block(display, body), meta


@dataclass(frozen=True)
class Scan:
    """A file streamed through a :class:`LineWindow` and the version it was read at."""

    version: Version
    window: LineWindow


def scan_file(target: str, display: str, guard: Protection, window: LineWindow) -> Scan | None:
    """Stream ``target`` through ``window`` (``None`` when missing); the hash only up to 8 MiB. Blocking."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        guard.check_opened(fd, display, "read")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FsError(f"cannot read {quote(display)}: not a regular file", "FS_NOT_REGULAR_FILE")
        hasher = hashlib.sha256() if st.st_size <= MAX_HASHED else None
        feeding = True
        while chunk := os.read(fd, READ_CHUNK):
            if hasher is not None:
                hasher.update(chunk)
            feeding = feeding and window.feed(chunk)
            if not feeding and hasher is None:
                break
        if feeding:
            window.finish()
    finally:
        os.close(fd)
    digest = hasher.hexdigest() if hasher is not None else None
    return Scan((st.st_ino, st.st_size, st.st_mtime_ns, digest), window)


class FsTools:
    """Bodies of the three tools, bound to the plugin's context for service lookups."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.gate = Gate(ctx)

    # -- read -------------------------------------------------------------------------------

    async def read(self, args: dict[str, Any], exec: ToolExec) -> tuple[str, dict[str, Any]]:
        offset = positive_int(args.get("offset", 1))
        if offset is None:
            raise ToolError("offset must be a positive integer")
        limit = MAX_LINES
        if "limit" in args:
            raw_limit = args["limit"]
            if raw_limit > MAX_LINES:
                raise ToolError(f"limit must be less than or equal to {MAX_LINES}")
            checked = positive_int(raw_limit)
            if checked is None:
                raise ToolError("limit must be a positive integer")
            limit = checked
        display = resolve(self.ctx, exec, args["file_path"])
        target = canonical(display)
        guard = protection(self.ctx, exec)
        scan = await asyncio.to_thread(scan_file, target, display, guard, LineWindow(offset, limit))
        if scan is None:
            self.gate.record(exec, target, ABSENT)
            raise FsError(f"cannot read {quote(display)}: not found", "FS_NOT_FOUND")
        self.gate.record(exec, target, scan.version)
        window = scan.window
        if window.binary:
            raise FsError(f"cannot read {quote(display)}: binary file", "FS_NOT_TEXT")
        if offset > max(window.total, 1):
            raise FsError(
                f"offset {offset} is out of range for {quote(display)} ({window.total} lines)", "FS_NOT_FOUND"
            )
        return window.render(display)

    # -- write ------------------------------------------------------------------------------

    async def write(self, args: dict[str, Any], exec: ToolExec) -> tuple[str, dict[str, Any]]:
        display = resolve(self.ctx, exec, args["file_path"])
        content: str = args["content"]
        mode = await self.gate.mode(exec, args)
        fence = self.gate.fence_for(exec, mode)
        target = canonical(display)
        fence.check(target)
        async with path_lock(target):
            observing = self.gate.observing()
            seen = self.gate.seen(exec, target) if observing else None

            def plan(snap: Snapshot | None) -> bytes:
                if observing:
                    if snap is not None and (seen is None or seen == ABSENT):
                        raise not_observed(display)
                    if seen not in (None, ABSENT) and (snap is None or snap.version != seen):
                        raise stale("write", display)
                return content.encode("utf-8")

            done = await asyncio.to_thread(Rewrite(display, "write", fence, plan, lambda: stale("write", display)).run)
            self.gate.record(exec, done.target, done.version or ABSENT)
        snap = done.before
        old = snap.data.decode("utf-8", "replace") if snap is not None else None
        meta = {
            "operation": "create" if snap is None else "update",
            "path": display,
            "diffs": [{"path": display, "oldText": old, "newText": content}],
        }
        return file_block(display, "Created file" if snap is None else "Updated file"), meta

    # -- edit -------------------------------------------------------------------------------

    async def edit(self, args: dict[str, Any], exec: ToolExec) -> tuple[str, dict[str, Any]]:
        old_string: str = args["old_string"]
        new_string: str = args["new_string"]
        replace_all = args.get("replace_all") is True
        if not old_string:
            raise ToolError("old_string must be a non-empty string")
        display = resolve(self.ctx, exec, args["file_path"])
        mode = await self.gate.mode(exec, args)
        fence = self.gate.fence_for(exec, mode)
        target = canonical(display)
        fence.check(target)
        async with path_lock(target):
            observing = self.gate.observing()
            seen = self.gate.seen(exec, target) if observing else None
            texts: list[str] = []

            def plan(snap: Snapshot | None) -> bytes:
                if observing:
                    if seen is None:
                        raise not_observed(display)
                    if seen == ABSENT and snap is not None:
                        raise stale("edit", display)
                    if seen != ABSENT and (snap is None or snap.version != seen):
                        raise stale("edit", display)
                if snap is None:
                    raise FsError(f"cannot edit {quote(display)}: not found", "FS_NOT_FOUND")
                before = decode_text(snap.data)
                if before is None:
                    raise FsError(f"cannot edit {quote(display)}: binary file", "FS_NOT_TEXT")
                after = self._replace(before, old_string, new_string, replace_all, display)
                texts[:] = [before, after]
                return after.encode("utf-8")

            done = await asyncio.to_thread(Rewrite(display, "edit", fence, plan, lambda: stale("edit", display)).run)
            self.gate.record(exec, done.target, done.version or ABSENT)
        before, after = texts
        if replace_all:
            message = f"The file {display} has been updated. All occurrences were successfully replaced."
        else:
            message = f"The file {display} has been updated successfully."
        meta = {
            "operation": "update",
            "path": display,
            "diffs": [{"path": display, "oldText": before, "newText": after}],
        }
        return message, meta

    @staticmethod
    def _replace(content: str, old: str, new: str, replace_all: bool, display: str) -> str:
        count = content.count(old)
        if count == 0:
            raise FsError(f"old_string was not found in {quote(display)}", "FS_EDIT_NOT_FOUND")
        if count > 1 and not replace_all:
            raise FsError(
                f"old_string matched {count} times in {quote(display)}; "
                "provide a more specific old_string or set replace_all to true",
                "FS_AMBIGUOUS_EDIT",
            )
        return content.replace(old, new) if replace_all else content.replace(old, new, 1)


def _text(args: Any, value: tuple[str, Any]) -> list[dict[str, Any]]:
    return text(value[0])


def _meta(args: Any, value: tuple[str, Any]) -> Any:
    return value[1]


class Config(BaseModel):
    """Which of the three tools this row registers."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    read: bool = True
    write: bool = True
    edit: bool = True


name = "tool-fs"
inject = (TOOLS,)
optional = (SYSTEM_PROMPT, SANDBOX)


def apply(ctx: Context, config: Config) -> None:
    """Register the enabled file tools and their guidance sections."""
    tools = ctx.require(TOOLS)
    body = FsTools(ctx)
    sandboxed = ctx.get(SANDBOX) is not None
    definitions = {
        "read": ToolDefinition(
            "read",
            "Return the contents of a UTF-8 text file, each line prefixed with its line number.",
            READ,
            body.read,
            render=_text,
            is_concurrency_safe=lambda args: True,
            meta=_meta,
        ),
        "write": ToolDefinition(
            "write",
            "Write a UTF-8 text file, creating it or replacing its entire content.",
            write_parameters(sandboxed),
            body.write,
            render=_text,
            meta=_meta,
        ),
        "edit": ToolDefinition(
            "edit",
            "Change an existing UTF-8 text file by replacing an exact piece of literal text.",
            edit_parameters(sandboxed),
            body.edit,
            render=_text,
            meta=_meta,
        ),
    }
    system_prompt = ctx.get(SYSTEM_PROMPT)
    for key, definition in definitions.items():
        if not getattr(config, key):
            continue
        tools.register(ctx, definition)
        if system_prompt is not None:
            section, order, guidance = SECTIONS[key]
            system_prompt.section(ctx, section, order, guidance, interpolate=False)
