"""Stored session logs in tests: find one in either encoding, read its lines, or have plain ones written.

Every profile writes zstd logs (as the reference runtime does). Tests that only read a log use
:func:`stored_log` and :func:`log_lines`; tests that cut or edit a log's bytes line by line ask for
plain logs with :data:`PLAIN_LOGS` (pydsh still reads and appends to plain logs written before).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydsh.session.persistence import jsonl
from pydsh.session.persistence.jsonl import PLAIN, ZSTD

PLAIN_LOGS: list[dict[str, Any]] = [
    {"id": "session-persistence-jsonl", "config": {"root": "${home:sessions}", "compression": "none"}}
]
"""A patch layer making a profile write plain ``session.v4.jsonl`` logs."""
PLAIN_LOGS_YAML = '- {id: session-persistence-jsonl, config: {root: "${home:sessions}", compression: none}}\n'


def stored_logs(root: Path, session_id: str = "*") -> list[Path]:
    """Every stored log of ``session_id`` (any session: ``*``) in or under ``root``, either encoding."""
    found = root.rglob("session.v4.jsonl*")
    return sorted(p for p in found if p.name in (PLAIN, ZSTD) and session_id in ("*", p.parent.name))


def stored_log(root: Path, session_id: str = "*") -> Path:
    """The one stored log of ``session_id`` in or under ``root``, either encoding."""
    [path] = stored_logs(root, session_id)
    return path


def log_text(path: Path) -> str:
    """The JSONL text of a stored log (header line first), decompressed when it is zstd."""
    return jsonl.log_text(path.read_bytes(), path, path.name == ZSTD).decode()


def log_lines(path: Path) -> list[str]:
    """The lines of a stored log, header first."""
    return log_text(path).splitlines()
