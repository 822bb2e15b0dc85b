"""``results.jsonl``: one line per finished task, appended and fsynced one at a time.

A batch killed at any moment keeps every line it finished; a line cut short by the kill is ignored
when the file is read again and the next line starts on a line of its own. The last line of a task
is its result (a rerun may add a newer one for a task whose line said it was malformed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

STATUSES = ("completed", "error", "timeout", "over_budget", "invalid")
"""How a task's run ended; ``passed`` (check passed, or completed with no check) is separate."""
RERUN = frozenset({"invalid"})
"""Statuses a rerun tries again: a malformed line may have been fixed since."""


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """The last complete result line of each task id in ``path`` (an absent file has none)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), str):
            found[record["id"]] = record
    return found


def finished(results: dict[str, dict[str, Any]]) -> set[str]:
    """Task ids a rerun skips."""
    return {task_id for task_id, record in results.items() if record.get("status") not in RERUN}


class ResultsFile:
    """The batch's one writer of ``results.jsonl``: append a line, flush, fsync, before going on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def __enter__(self) -> ResultsFile:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a+", encoding="utf-8")
        if self._file.tell() and not _ends_with_newline(self.path):
            self._file.write("\n")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one line and wait until it is on disk."""
        assert self._file is not None, "open the results file with `with` first"
        self._file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as raw:
        raw.seek(-1, os.SEEK_END)
        return raw.read(1) == b"\n"
