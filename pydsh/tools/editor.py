"""The ``str_replace_editor`` tool of the minimal preset: view, create, str_replace, insert (spec 05 §4.13).

Mutations pass the same read-before-write observations and file fence as ``write``/``edit``; a
fence denial is the bare marker (this tool has no escalation fields).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from typing import Any

from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec
from pydsh.kernel.context import Context
from pydsh.policy.keys import SANDBOX
from pydsh.tools.files import ABSENT, Gate, Rewrite, Snapshot, canonical, load, path_lock
from pydsh.tools.fs import not_observed, split_lines, stale
from pydsh.tools.protected import protection

MAX_OUTPUT = 16000
CLIPPED = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. You should retry "
    "this tool after you have searched inside the file with `grep -n` in order to find the line numbers of what "
    "you are looking for.</NOTE>"
)
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")

DESCRIPTION = (
    "Editing tool for looking at, creating and changing files\n"
    "* Its state persists across calls and across your exchanges with the user\n"
    "* `view` on a file prints it with line numbers, like `cat -n`; `view` on a directory lists its non-hidden "
    "files and directories up to 2 levels deep\n"
    "* `create` refuses a `path` that already exists as a file\n"
    "* Long output from any command is cut short and marked with `<response clipped>`\n"
    "* A null placeholder for a parameter the chosen command does not use counts as omitted. Parameters the "
    "command requires still need values; to delete a match with `str_replace`, leave `new_str` out instead of "
    "setting it to null\n"
    "Using `str_replace`:\n"
    "* `old_str` must match EXACTLY one or more consecutive lines of the current file, whitespace included\n"
    "* If `old_str` occurs more than once, nothing is replaced; add surrounding lines to `old_str` until it is "
    "unique\n"
    "* `new_str` holds the edited lines that take the place of `old_str`"
)


def _nullable(kind: dict[str, Any], description: str) -> dict[str, Any]:
    return {"oneOf": [kind, {"type": "null"}], "description": description}


PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {
            "type": "string",
            "description": "What to do. One of: `view`, `create`, `str_replace`, `insert`.",
            "enum": ["view", "create", "str_replace", "insert"],
        },
        "path": {
            "type": "string",
            "description": "Absolute path of the file or directory, e.g. `/repo/file.py` or `/repo`.",
        },
        "file_text": _nullable(
            {"type": "string"},
            "Required by `create`: the content of the new file. Commands that do not use it treat a null "
            "placeholder as omitted.",
        ),
        "insert_line": _nullable(
            {"type": "integer"},
            "Required by `insert`: `new_str` goes AFTER this line of `path` (0 inserts at the top). Commands that "
            "do not use it treat a null placeholder as omitted.",
        ),
        "new_str": _nullable(
            {"type": "string"},
            "For `str_replace`, optional: the replacement text (leave it out to delete the match). For `insert`, "
            "required: the text to insert. A null placeholder is accepted only by commands that do not use it.",
        ),
        "old_str": _nullable(
            {"type": "string"},
            "Required by `str_replace`: the exact text in `path` to replace. Commands that do not use it treat a "
            "null placeholder as omitted.",
        ),
        "view_range": _nullable(
            {"type": "array", "items": {"type": "integer"}},
            "For `view` of a file, optional: the line range to show, 1-based, e.g. [11, 12] shows lines 11 and "
            "12; [start_line, -1] shows from start_line to the end. Omitted or null shows the whole file.",
        ),
    },
    "required": ["command", "path"],
}


def clip(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + CLIPPED


def _require(args: dict[str, Any], key: str, command: str) -> Any:
    value = args.get(key)
    if value is None:
        raise ToolError(f"Parameter `{key}` is required for command: {command}")
    return value


def _missing(path: str) -> ToolError:
    return ToolError(f"The path {path} does not exist. Please provide a valid path.")


class Editor:
    """The editor's commands, bound to the plugin's context."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.gate = Gate(ctx)

    async def __call__(self, args: dict[str, Any], exec: ToolExec) -> str:
        path: str = args["path"]
        if not os.path.isabs(path):
            raise ToolError(
                f"The path {path} is not an absolute path, it should start with `/`. Maybe you meant /{path}?"
            )
        command: str = args["command"]
        if command == "view":
            return clip(await self.view(path, args.get("view_range"), exec))
        if command == "create":
            return await self.create(path, _require(args, "file_text", command), exec)
        if command == "str_replace":
            old = _require(args, "old_str", command)
            if "new_str" in args and args["new_str"] is None:
                raise ToolError("Parameter `new_str` must be a string or left out for command: str_replace")
            return await self.str_replace(path, old, args.get("new_str") or "", exec)
        line = _require(args, "insert_line", command)
        return await self.insert(path, line, _require(args, "new_str", command), exec)

    # -- view -------------------------------------------------------------------------------

    async def view(self, path: str, view_range: list[int] | None, exec: ToolExec) -> str:
        target = canonical(path)
        guard = protection(self.ctx, exec)
        if os.path.isdir(target):
            if view_range is not None:
                raise ToolError("The `view_range` parameter is not allowed when `path` points to a directory.")
            guard.check(target, path, "view")
            return await asyncio.to_thread(self._listing, path)
        snap = await asyncio.to_thread(load, target, path, "view", lambda fd: guard.check_opened(fd, path, "view"))
        if snap is None:
            self.gate.record(exec, target, ABSENT)
            raise _missing(path)
        self.gate.record(exec, target, snap.version)
        lines = split_lines(snap.data.decode("utf-8", "replace"))
        first, last = 1, len(lines)
        suffix = ""
        if view_range is not None:
            first, last = self._range(view_range, len(lines))
            suffix = f" with view_range=[{view_range[0]}, {view_range[1]}]"
        numbered = "".join(f"{n:6d}  {lines[n - 1]}\n" for n in range(first, last + 1))
        header = f"Here's the content of {path} with line numbers (which has a total of {len(lines)} lines)"
        return f"{header}{suffix}:\n{numbered}"

    @staticmethod
    def _range(view_range: list[int], total: int) -> tuple[int, int]:
        if len(view_range) != 2:
            raise ToolError("Invalid `view_range` parameter: it should be a list of two integers.")
        first, last = view_range
        shown = f"[{first}, {last}]"
        if not 1 <= first <= max(total, 1):
            raise ToolError(
                f"Invalid `view_range` parameter: {shown}. Its first element `{first}` should be within the range "
                f"of lines of the file: [1, {total}]."
            )
        if last == -1:
            return first, total
        if not first <= last <= total:
            raise ToolError(
                f"Invalid `view_range` parameter: {shown}. Its second element `{last}` should be -1 or within "
                f"[{first}, {total}]."
            )
        return first, last

    @staticmethod
    def _listing(path: str) -> str:
        rows: list[tuple[str, str]] = []
        root = path.rstrip("/") or "/"

        def visit(directory: str, depth: int) -> None:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                return
            for entry in entries:
                if entry.name.startswith(".") or entry.name in SKIPPED_DIRS:
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                rows.append(("d" if is_dir else "f", os.path.join(directory, entry.name)))
                if is_dir and depth < 2:
                    visit(entry.path, depth + 1)

        visit(root, 1)
        header = (
            f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items, "
            "node_modules, and Python cache directories:\n"
        )
        return header + "".join(f"{kind}\t{p}\n" for kind, p in sorted(rows, key=lambda row: row[1]))

    # -- mutations --------------------------------------------------------------------------

    async def _rewrite(self, exec: ToolExec, path: str, verb: str, change: Callable[[Snapshot | None], str]) -> None:
        """Replace ``path`` with ``change(current)`` through the fenced directory walk, off the event loop."""
        fence = self.gate.fence_for(exec, self._mode(exec), hint=False)
        target = canonical(path)
        fence.check(target)
        async with path_lock(target):
            if verb == "write" and (os.path.lexists(path) or os.path.exists(target)):
                raise _exists(path)
            check = self._observation(exec, path, target)

            def plan(snap: Snapshot | None) -> bytes:
                check(snap)
                return change(snap).encode("utf-8")

            done = await asyncio.to_thread(Rewrite(path, verb, fence, plan, lambda: stale(verb, path)).run)
            self.gate.record(exec, done.target, done.version or ABSENT)

    def _mode(self, exec: ToolExec) -> str | None:
        sandbox = self.ctx.get(SANDBOX)
        return str(sandbox.mode(exec.session)) if sandbox is not None else None

    def _observation(self, exec: ToolExec, path: str, target: str) -> Callable[[Snapshot | None], None]:
        """The read-before-write check of an existing file, bound to what this call has seen."""
        observing = self.gate.observing()
        seen = self.gate.seen(exec, target) if observing else None

        def check(snap: Snapshot | None) -> None:
            if snap is None or not observing:
                return
            if seen is None or seen == ABSENT:
                raise not_observed(path)
            if seen != snap.version:
                raise stale("edit", path)

        return check

    async def create(self, path: str, text: str, exec: ToolExec) -> str:
        def change(snap: Snapshot | None) -> str:
            if snap is not None:
                raise _exists(path)
            return text

        await self._rewrite(exec, path, "write", change)
        return f"New file created successfully at: {path}"

    async def str_replace(self, path: str, old: str, new: str, exec: ToolExec) -> str:
        def change(snap: Snapshot | None) -> str:
            content = _existing(snap, path)
            count = content.count(old)
            if count == 0:
                raise ToolError(f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}.")
            if count > 1:
                starts = [content.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(old), content)]
                raise ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines {starts}. "
                    "Please ensure it is unique"
                )
            return content.replace(old, new, 1)

        await self._rewrite(exec, path, "edit", change)
        return f"The file {path} has been edited successfully."

    async def insert(self, path: str, line: int, text: str, exec: ToolExec) -> str:
        def change(snap: Snapshot | None) -> str:
            lines = _LINE.findall(_existing(snap, path))
            if not 0 <= line <= len(lines):
                raise ToolError(
                    f"Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: "
                    f"[0, {len(lines)}]"
                )
            before = lines[:line]
            if before and not before[-1].endswith("\n"):
                before[-1] += "\n"
            block = text if text.endswith("\n") else text + "\n"
            return "".join([*before, block, *lines[line:]])

        await self._rewrite(exec, path, "edit", change)
        return f"The file {path} has been edited successfully."


def _exists(path: str) -> ToolError:
    return ToolError(f"File already exists at: {path}. Cannot overwrite files using command `create`.")


def _existing(snap: Snapshot | None, path: str) -> str:
    """The text of the file being edited; a missing file is the editor's missing-path error."""
    if snap is None:
        raise _missing(path)
    return snap.data.decode("utf-8", "replace")


name = "tool-str-replace-editor"
inject = (TOOLS,)


def apply(ctx: Context, config: None) -> None:
    """Register ``str_replace_editor``."""
    ctx.require(TOOLS).register(ctx, ToolDefinition("str_replace_editor", DESCRIPTION, PARAMETERS, Editor(ctx)))
