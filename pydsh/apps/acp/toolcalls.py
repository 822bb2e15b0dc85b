"""How a pydsh tool call reads in the editor: ACP's kind, a short title and the files it touches, so an
editor can show "Read src/app.py" with a file icon and follow along, instead of ``other`` / ``read``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
TITLE_LIMIT = 80


@dataclass(frozen=True)
class Presentation:
    """The kind, title and touched files (absolute path, optional 1-based line) of one call."""

    kind: Kind
    title: str
    locations: tuple[tuple[str, int | None], ...] = ()


def present(name: str, args: object, cwd: str) -> Presentation:
    """The presentation of a call of tool ``name`` with (parsed) ``args`` in a session working in ``cwd``."""
    fields = args if isinstance(args, Mapping) else {}
    describe = PRESENTERS.get(name)
    if describe is None:
        return Presentation(_kind_of(name), _short(name))
    return describe(fields, cwd)


def _text(fields: Mapping[str, Any], key: str) -> str:
    value = fields.get(key)
    return value if isinstance(value, str) else ""


def _short(text: str) -> str:
    """One line of at most :data:`TITLE_LIMIT` characters."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LIMIT else line[: TITLE_LIMIT - 1] + "…"


def _where(path: str, cwd: str) -> str:
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))


def _file(verb: str, kind: Kind, key: str = "file_path") -> Callable[[Mapping[str, Any], str], Presentation]:
    def describe(fields: Mapping[str, Any], cwd: str) -> Presentation:
        path = _text(fields, key)
        if not path:
            return Presentation(kind, verb)
        line = fields.get("offset")
        first = line if type(line) is int and line > 0 else None
        return Presentation(kind, _short(f"{verb} {path}"), ((_where(path, cwd), first),))

    return describe


def _search(verb: str) -> Callable[[Mapping[str, Any], str], Presentation]:
    def describe(fields: Mapping[str, Any], cwd: str) -> Presentation:
        pattern, path = _text(fields, "pattern"), _text(fields, "path")
        title = f"{verb} {pattern}" + (f" in {path}" if path else "")
        return Presentation("search", _short(title), ((_where(path, cwd), None),) if path else ())

    return describe


def _command(fields: Mapping[str, Any], cwd: str) -> Presentation:
    label = _text(fields, "description") or _text(fields, "command") or "Run a command"
    return Presentation("execute", _short(label))


def _editor(fields: Mapping[str, Any], cwd: str) -> Presentation:
    command, path = _text(fields, "command"), _text(fields, "path")
    kind: Kind = "read" if command == "view" else "edit"
    verb = {"view": "Read", "create": "Write"}.get(command, "Edit")
    locations = ((_where(path, cwd), None),) if path else ()
    return Presentation(kind, _short(f"{verb} {path}" if path else verb), locations)


def _fetch(fields: Mapping[str, Any], cwd: str) -> Presentation:
    return Presentation("fetch", _short(f"Fetch {_text(fields, 'url')}".strip()))


def _delegate(fields: Mapping[str, Any], cwd: str) -> Presentation:
    return Presentation("other", _short(f"Delegate: {_text(fields, 'description')}".rstrip(": ")))


def _cd(fields: Mapping[str, Any], cwd: str) -> Presentation:
    target = _text(fields, "cd")
    return Presentation("other", _short(f"Change directory to {target}" if target else "Working directory"))


def _plan(fields: Mapping[str, Any], cwd: str) -> Presentation:
    return Presentation("think", "Update the to-do list")


def _skill(fields: Mapping[str, Any], cwd: str) -> Presentation:
    return Presentation("read", _short(f"Load skill {_text(fields, 'name')}".strip()))


PRESENTERS: dict[str, Callable[[Mapping[str, Any], str], Presentation]] = {
    "read": _file("Read", "read"),
    "write": _file("Write", "edit"),
    "edit": _file("Edit", "edit"),
    "str_replace_editor": _editor,
    "glob": _search("Find"),
    "grep": _search("Search for"),
    "bash": _command,
    "web_fetch": _fetch,
    "subagent": _delegate,
    "subagent_fork": _delegate,
    "working_directory": _cd,
    "todo_write": _plan,
    "skill": _skill,
}


def _kind_of(name: str) -> Kind:
    """The kind of a tool without a presenter: background jobs run commands, the rest is ``other``."""
    return "execute" if name.startswith("job_") else "other"
