"""Task files: a JSONL file (one task a line) or a directory of task files, read into checked tasks.

A line or file that is not a usable task becomes a :class:`Problem` naming it and what is wrong, so
one bad line costs only its own task (its result line says why) and never the batch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydsh.batch.errors import BatchError

TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A task id names its directory under the batch's output, so it is a plain file name."""
KNOWN = frozenset(
    {"id", "prompt", "workspace", "repo", "ref", "setup", "check", "provider", "model", "preset", "timeout", "tokens"}
)
TASK_FILES = (".json", ".jsonl", ".yaml", ".yml")


@dataclass(frozen=True)
class Task:
    """One agent task: its prompt, where it works, how it is set up and checked, and its budgets."""

    id: str
    prompt: str
    workspace: str | None = None
    """A directory copied into the task's own workspace."""
    repo: str | None = None
    """A git repository (path or URL) cloned and checked out at ``ref`` as the workspace."""
    ref: str | None = None
    setup: tuple[str, ...] = ()
    check: tuple[str, ...] = ()
    provider: str | None = None
    model: str | None = None
    preset: str | None = None
    timeout: float | None = None
    """Wall-time budget in seconds (``None``: the batch's default)."""
    tokens: int | None = None
    """Token budget: every bucket the provider reports, summed over the task's model calls."""

    def to_json(self) -> dict[str, Any]:
        """The task as the JSON a worker reads."""
        out: dict[str, Any] = {"id": self.id, "prompt": self.prompt}
        for key in ("workspace", "repo", "ref", "provider", "model", "preset", "timeout", "tokens"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.setup:
            out["setup"] = list(self.setup)
        if self.check:
            out["check"] = list(self.check)
        return out


@dataclass(frozen=True)
class Problem:
    """A task that cannot run: where it came from and the one line saying why."""

    id: str
    source: str
    message: str


@dataclass
class TaskList:
    """Every task of a task file or directory, in order, with the problems among them."""

    tasks: list[Task] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def read_tasks(path: Path) -> TaskList:
    """The tasks of ``path`` (a JSONL file or a directory of task files); ``BatchError`` if it is neither."""
    if path.is_dir():
        entries = [(p, p.stem) for p in sorted(path.iterdir()) if p.suffix in TASK_FILES and p.is_file()]
        if not entries:
            raise BatchError(f"no task files ({', '.join(TASK_FILES)}) in directory {path}")
        found = TaskList()
        for file, stem in entries:
            _extend(found, _file_entries(file, stem))
        return _unique(found)
    if not path.is_file():
        raise BatchError(f"no task file or directory at {path}")
    found = TaskList()
    _extend(found, _file_entries(path, None))
    return _unique(found)


@dataclass(frozen=True)
class _Entry:
    """One task as read: the id it gets by default, where it stands, its parsed value (or parse error)."""

    default_id: str
    source: str
    value: Any
    base: Path
    """The directory relative paths of the task are taken from."""


def _file_entries(path: Path, stem: str | None) -> list[_Entry]:
    """One entry per task in ``path``: a JSONL file's lines, or a single-task JSON/YAML file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchError(f"cannot read task file {path}: {exc}") from None
    base = path.parent
    if path.suffix != ".jsonl":
        value = _parse_yaml(text) if path.suffix in (".yaml", ".yml") else _parse_json(text)
        return [_Entry(stem or path.stem, path.name, value, base)]
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            default = f"{stem}-{number}" if stem else f"line-{number}"
            entries.append(_Entry(default, f"{path.name}:{number}", _parse_json(line), base))
    return entries


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        return BatchError(f"not valid JSON: {exc}")


def _parse_yaml(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return BatchError(f"not valid YAML: {' '.join(str(exc).split())}")


def _extend(found: TaskList, entries: list[_Entry]) -> None:
    for entry in entries:
        try:
            found.tasks.append(task_of(entry.value, entry.default_id, entry.base))
        except BatchError as exc:
            found.problems.append(Problem(_id_hint(entry.value, entry.default_id), entry.source, str(exc)))


def _id_hint(value: Any, default: str) -> str:
    """The id a bad task's result line carries: its own when usable, else where it stands."""
    if isinstance(value, dict) and isinstance(value.get("id"), str) and TASK_ID.fullmatch(value["id"]):
        return str(value["id"])
    return default


def _unique(found: TaskList) -> TaskList:
    """A second task with an id already used is a problem of its own (the first one runs)."""
    seen: set[str] = {p.id for p in found.problems}
    kept: list[Task] = []
    for task in found.tasks:
        if task.id in seen:
            found.problems.append(Problem(task.id, task.id, f'task id "{task.id}" is used twice'))
            continue
        seen.add(task.id)
        kept.append(task)
    found.tasks = kept
    return found


def task_of(value: Any, default_id: str, base: Path) -> Task:
    """A checked :class:`Task` from one parsed entry; relative paths are taken from ``base``."""
    if isinstance(value, BatchError):
        raise value
    if not isinstance(value, dict):
        raise BatchError(f"a task is a JSON object, not {type(value).__name__}")
    unknown = sorted(set(value) - KNOWN)
    if unknown:
        raise BatchError(f"unknown task field {unknown[0]!r} (known: {', '.join(sorted(KNOWN))})")
    task_id = value.get("id", default_id)
    if not isinstance(task_id, str) or not TASK_ID.fullmatch(task_id):
        raise BatchError(f"task id {task_id!r} is not a plain name (letters, digits, '.', '_', '-'; 128 at most)")
    prompt = value.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise BatchError('a task needs a non-empty "prompt"')
    if value.get("workspace") is not None and value.get("repo") is not None:
        raise BatchError('give either "workspace" (a directory to copy) or "repo" (a git repository), not both')
    if value.get("ref") is not None and value.get("repo") is None:
        raise BatchError('"ref" needs "repo"')
    if bool(value.get("provider")) != bool(value.get("model")):
        raise BatchError('give "provider" and "model" together')
    return Task(
        id=task_id,
        prompt=prompt,
        workspace=_path(value, "workspace", base),
        repo=_repo(value, base),
        ref=_text(value, "ref"),
        setup=_commands(value, "setup"),
        check=_commands(value, "check"),
        provider=_text(value, "provider"),
        model=_text(value, "model"),
        preset=_text(value, "preset"),
        timeout=_positive(value, "timeout", float),
        tokens=_positive(value, "tokens", int),
    )


def _text(value: dict[str, Any], key: str) -> str | None:
    item = value.get(key)
    if item is None:
        return None
    if not isinstance(item, str) or not item:
        raise BatchError(f'"{key}" must be a non-empty string')
    return item


def _path(value: dict[str, Any], key: str, base: Path) -> str | None:
    text = _text(value, key)
    return None if text is None else str((base / Path(text).expanduser()).resolve())


def _repo(value: dict[str, Any], base: Path) -> str | None:
    """A repository URL as given; a local path made absolute."""
    text = _text(value, "repo")
    if text is None or "://" in text or re.match(r"^[\w.-]+@[\w.-]+:", text):
        return text
    return str((base / Path(text).expanduser()).resolve())


def _commands(value: dict[str, Any], key: str) -> tuple[str, ...]:
    item = value.get(key)
    if item is None:
        return ()
    items = [item] if isinstance(item, str) else item
    if not isinstance(items, list) or not all(isinstance(c, str) and c.strip() for c in items):
        raise BatchError(f'"{key}" must be a command or a list of commands (non-empty strings)')
    return tuple(items)


def _positive(value: dict[str, Any], key: str, kind: type[float] | type[int]) -> Any:
    item = value.get(key)
    if item is None:
        return None
    if isinstance(item, bool) or not isinstance(item, (int, float)) or item <= 0 or (kind is int and item != int(item)):
        noun = "a positive whole number" if kind is int else "a positive number of seconds"
        raise BatchError(f'"{key}" must be {noun}')
    return kind(item)


def task_from_json(data: dict[str, Any]) -> Task:
    """A task a worker received (already checked by the batch)."""
    return Task(
        id=data["id"],
        prompt=data["prompt"],
        workspace=data.get("workspace"),
        repo=data.get("repo"),
        ref=data.get("ref"),
        setup=tuple(data.get("setup", ())),
        check=tuple(data.get("check", ())),
        provider=data.get("provider"),
        model=data.get("model"),
        preset=data.get("preset"),
        timeout=data.get("timeout"),
        tokens=data.get("tokens"),
    )
