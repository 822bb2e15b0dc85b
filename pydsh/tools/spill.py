"""Private spill files for results too large to show inline (spec 05 §3.6).

Files live under ``<tmp>/pydsh-spill-<random>/<session-id>/<hex12>-<tool>.txt`` (directories 0700,
files 0600). The first use in a process removes spill directories older than seven days.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from typing import BinaryIO

log = logging.getLogger("pydsh.tools.spill")

SWEEP_AFTER_S = 7 * 24 * 3600
PREFIX = "pydsh-spill-"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_root: str | None = None


def _sweep(base: str) -> None:
    cutoff = time.time() - SWEEP_AFTER_S
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if entry.is_dir(follow_symlinks=False) and st.st_uid == os.getuid() and st.st_mtime < cutoff:
            shutil.rmtree(entry.path, ignore_errors=True)


def spill_root() -> str:
    """This process's spill directory (created, and old ones swept, on first use)."""
    global _root
    if _root is None or not os.path.isdir(_root):
        base = tempfile.gettempdir()
        _sweep(base)
        _root = tempfile.mkdtemp(prefix=PREFIX, dir=base)
    return _root


def open_spill(session_id: str, tool: str) -> tuple[str, BinaryIO]:
    """A new private spill file for ``tool`` in ``session_id``'s directory, open for writing."""
    directory = os.path.join(spill_root(), _UNSAFE.sub("_", session_id) or "_")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, f"{secrets.token_hex(6)}-{_UNSAFE.sub('_', tool)}.txt")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    return path, os.fdopen(fd, "wb")


def save(session_id: str, tool: str, text: str) -> str | None:
    """Write ``text`` to a new spill file; ``None`` (after a warning) when that fails."""
    try:
        path, handle = open_spill(session_id, tool)
        with handle:
            handle.write(text.encode("utf-8", "surrogatepass"))
    except OSError as exc:
        log.warning("could not save the full %s result: %s", tool, exc)
        return None
    return path
