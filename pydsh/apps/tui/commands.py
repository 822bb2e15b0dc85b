"""The ``/`` commands of the prompt and the completions of ``/`` and ``@file`` as the user types."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

COMMANDS: dict[str, str] = {
    "/help": "keys and commands",
    "/new": "start a new session in this workspace",
    "/resume": "pick a stored session to continue",
    "/compact": "compact the history into a checkpoint",
    "/goal": "the session goal: /goal OBJECTIVE | edit OBJECTIVE | pause | resume | clear (no argument: show)",
    "/plan": "plan mode: /plan [MESSAGE] to enter, /plan off to leave",
    "/model": "switch the model: /model PROVIDER/MODEL (no argument: pick)",
    "/effort": "set the reasoning effort: /effort LEVEL",
    "/mode": "switch the permission mode: /mode read-only|workspace-write|danger-full-access",
    "/agents": "the tree of agents; open a member's session",
    "/copy": "copy the last answer to the clipboard",
    "/quit": "stop a running turn and leave",
}
"""Every command and its one-line help."""
MAX_FILES = 20_000
SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".ruff_cache"})


@dataclass(frozen=True)
class Completion:
    """What replaces the token at the cursor: ``start`` (column in the line) and the new text."""

    start: int
    value: str
    help: str = ""


def command_completions(line: str, extra: Mapping[str, str] | None = None) -> list[Completion]:
    """Commands (the TUI's own, then ``extra``: the composition's MCP prompts) starting with what the line holds,
    while it is one ``/word`` being typed."""
    if not line.startswith("/") or " " in line:
        return []
    known = {**COMMANDS, **(extra or {})}
    return [Completion(0, name, help) for name, help in known.items() if name.startswith(line)]


def at_token(line: str, column: int) -> tuple[int, str] | None:
    """The ``@partial/path`` the cursor is at the end of: its start column and the partial path."""
    start = line.rfind("@", 0, column)
    if start < 0 or (start > 0 and not line[start - 1].isspace()):
        return None
    partial = line[start + 1 : column]
    return None if any(c.isspace() for c in partial) else (start, partial)


class FileIndex:
    """The workspace's file paths (relative, hidden and build folders skipped), listed once on first use."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._paths: list[str] | None = None

    def paths(self) -> list[str]:
        if self._paths is None:
            self._paths = list(self._walk())
        return self._paths

    def _walk(self) -> list[str]:
        found: list[str] = []
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            rel = os.path.relpath(folder, self.root)
            for name in sorted(files):
                found.append(name if rel == "." else os.path.join(rel, name))
                if len(found) >= MAX_FILES:
                    return found
        return found

    def complete(self, line: str, column: int, limit: int = 12) -> list[Completion]:
        """Paths matching the ``@`` token at the cursor (the path replaces the token, ``@`` included): prefix
        matches first, then substring matches."""
        token = at_token(line, column)
        if token is None:
            return []
        start, partial = token
        lowered = partial.lower()
        prefix = [p for p in self.paths() if p.lower().startswith(lowered)]
        inside = [p for p in self.paths() if lowered in p.lower() and p not in prefix] if lowered else []
        return [Completion(start, path) for path in (prefix + inside)[:limit]]
