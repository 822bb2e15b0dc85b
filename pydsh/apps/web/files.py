"""Small files the web app keeps: written atomically, read leniently."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("pydsh.web")


def write_text(path: Path, text: str, mode: int = 0o600) -> None:
    """Atomic write: a synced temporary file in the same folder, then rename (a crash leaves the old file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: Path, value: Any, mode: int = 0o600) -> None:
    """``value`` as indented JSON, atomically."""
    write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n", mode)


def read_json(path: Path, default: Any) -> Any:
    """The file's JSON, ``default`` when it is missing or unreadable (logged)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default
    except (OSError, ValueError):
        log.warning("ignored unreadable %s", path.name)
        return default
