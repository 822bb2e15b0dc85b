"""How a tool call reads in the terminal: a one-line summary (collapsed) and its body (expanded).

Bash shows its exit code, write and edit a coloured diff, read the file's first lines, grep and glob
their matches, todo the list. Rich renderables only, so the cards are tested without a screen.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from pydsh.apps.tui.feed import Block

EXIT = re.compile(r"\[exit code: (-?\d+)\]\s*$")
BODY_LINES = 40
TODO_MARKS = {"completed": "✔", "in_progress": "◐", "pending": "○"}


def _short(text: str, limit: int = 70) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def subject(block: Block) -> str:
    """What the call is about: the command, the path, the pattern."""
    args = block.arguments
    for key in ("command", "file_path", "path", "pattern", "query", "url", "description", "_raw"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return _short(value)
    if block.title == "todo_write":
        return f"{len(args.get('todos') or [])} items"
    return ""


def exit_code(result: str | None) -> int | None:
    """The ``[exit code: N]`` a bash result ends with."""
    found = EXIT.search(result or "")
    return int(found[1]) if found else None


def status(block: Block) -> tuple[str, str]:
    """A mark and its style: running, done, failed."""
    if block.result is None:
        return "…", "yellow"
    code = exit_code(block.result) if block.title == "bash" else None
    if block.error or (code is not None and code != 0):
        return "✘", "red"
    return "✔", "green"


def headline(block: Block, expanded: bool) -> Text:
    """The card's one line: fold mark, status, tool name, subject and the outcome in brief."""
    mark, style = status(block)
    line = Text()
    line.append("▾ " if expanded else "▸ ", style="dim")
    line.append(f"{mark} ", style=style)
    line.append(block.title, style="bold")
    about = subject(block)
    if about:
        line.append(f"  {about}")
    outcome = brief(block)
    if outcome:
        line.append(f"  {outcome}", style="red" if style == "red" else "dim")
    return line


def brief(block: Block) -> str:
    """The outcome in a few words (exit code, line counts, match counts)."""
    result = block.result
    if result is None:
        return "running"
    if block.error:
        return _short(result.splitlines()[0] if result.strip() else "failed", 50)
    if block.title == "bash":
        code = exit_code(result)
        return f"exit {code}" if code is not None else ""
    if block.title in ("edit", "write"):
        added, removed = _counts(diff_lines(block))
        return f"+{added} −{removed}"
    if block.title == "glob":
        return f"{len([x for x in result.splitlines() if x.strip()])} files"
    first = result.splitlines()[0] if result.strip() else ""
    return _short(first, 40) if block.title == "grep" else ""


def body(block: Block) -> RenderableType:
    """The expanded card: the tool's own view of the call and its result."""
    if block.title in ("edit", "write") and not block.error:
        return diff_view(diff_lines(block))
    if block.title == "todo_write":
        return todo_view(block.arguments.get("todos") or [])
    parts: list[RenderableType] = []
    if block.title == "bash" and isinstance(block.arguments.get("command"), str):
        parts.append(Text(f"$ {block.arguments['command']}", style="bold"))
    if block.result is not None:
        parts.append(Text(_clip(block.result.rstrip("\n")), style="red" if block.error else ""))
    return Group(*parts)


def _clip(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= BODY_LINES:
        return text
    return "\n".join([*lines[:BODY_LINES], f"… {len(lines) - BODY_LINES} more lines"])


def diff_lines(block: Block) -> list[str]:
    """The change a write or edit call asks for, as unified diff lines (no file headers)."""
    args = block.arguments
    if block.title == "write":
        before, after = "", str(args.get("content") or "")
    else:
        before, after = str(args.get("old_string") or ""), str(args.get("new_string") or "")
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=2)
    return [line for line in diff if not line.startswith(("---", "+++"))]


def _counts(lines: list[str]) -> tuple[int, int]:
    added = sum(1 for line in lines if line.startswith("+"))
    removed = sum(1 for line in lines if line.startswith("-"))
    return added, removed


def diff_view(lines: list[str]) -> Text:
    """Diff lines coloured: additions green, removals red, hunks dim."""
    out = Text()
    shown = lines[:BODY_LINES]
    for line in shown:
        style = (
            "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "dim"
            if line.startswith("@@")
            else ""
        )
        out.append(line + "\n", style=style)
    if len(lines) > len(shown):
        out.append(f"… {len(lines) - len(shown)} more lines\n", style="dim")
    out.rstrip()
    return out


def todo_view(todos: list[Any]) -> Text:
    """The todo list with a mark per status."""
    out = Text()
    for item in todos:
        if not isinstance(item, dict):
            continue
        state = str(item.get("status") or "pending")
        style = "dim strike" if state == "completed" else "bold" if state == "in_progress" else ""
        out.append(f"{TODO_MARKS.get(state, '○')} {item.get('content', '')}\n", style=style)
    out.rstrip()
    return out
