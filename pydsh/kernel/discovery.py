"""The ``pydsh.plugins`` entry-point table, cached across processes (reading it costs start-up ~50 ms).

The cache is keyed on what ``importlib.metadata`` would read: every ``sys.path`` entry and, in each
directory, the names of its ``*.dist-info``/``*.egg-info`` directories with the size and mtime of
their ``entry_points.txt``. Installing, removing or editing a distribution changes the key; a
missing, unreadable or corrupt cache file is rebuilt. When another import finder can list
distributions, the table is read afresh every time. The file lives in ``$XDG_CACHE_HOME/pydsh``
(default ``~/.cache/pydsh``) and is replaced atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

GROUP = "pydsh.plugins"
CACHE_FILE = "entry-points.json"
METADATA_SUFFIXES = (".dist-info", ".egg-info")


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/pydsh``, else ``~/.cache/pydsh``."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "pydsh"


def installed_key() -> list[Any]:
    """What identifies the installed distributions' metadata as ``importlib.metadata`` finds it on ``sys.path``.

    Directories without metadata and missing entries add nothing (metadata appearing there adds an
    item), so the key does not change with a working directory that holds no distribution.
    """
    parts: list[Any] = []
    for entry in sys.path:
        path = entry or os.getcwd()
        try:
            with os.scandir(path) as listing:
                names = sorted(e.name for e in listing if e.name.endswith(METADATA_SUFFIXES))
        except NotADirectoryError:
            parts.append([path, _stat(path)])
            continue
        except OSError:
            continue
        if names:
            parts.append([path, [[name, _stat(os.path.join(path, name, "entry_points.txt"))] for name in names]])
    return parts


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def plugin_entry_points() -> dict[str, str]:
    """``pydsh.plugins`` entry points (name -> value), from the cache when the installation is unchanged."""
    key = installed_key() if _path_finders_only() else None
    path = cache_dir() / CACHE_FILE
    cached = read_json(path) if key is not None else None
    if cached is not None and cached.get("key") == key and isinstance(cached.get("table"), dict):
        table = cached["table"]
        if all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
            return dict(table)
    from importlib.metadata import entry_points

    table = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    if key is not None:
        write_json(path, {"key": key, "table": table})
    return table


def _path_finders_only() -> bool:
    """Whether distributions come only from ``sys.path`` (no other finder lists some the key would miss)."""
    from importlib.machinery import PathFinder

    return all(f is PathFinder or not hasattr(f, "find_distributions") for f in sys.meta_path)


def read_json(path: Path) -> dict[str, Any] | None:
    """A cache file's object, ``None`` when it is missing, unreadable or not a JSON object."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically; a cache that cannot be written is simply not kept."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
