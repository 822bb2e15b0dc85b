"""Folders and files the page may look at: the directory browser of "Add workspace" (spec 12 F6) and the
composer's ``@file`` completion (F29). Stdlib only; the routes run these in a thread.

Both are fenced. The directory browser lists folders only, and only inside the browsing roots (the user's
home folder and every listed workspace), judged after symlinks and ``..`` are resolved; names that are
hidden or not valid Unicode are left out. A path that is too long, not absolute, holds a control character
or text that was not valid Unicode, lies outside the roots, is missing or is no folder gets one 4xx line.
File completion lists files inside one listed workspace without leaving it (hidden folders and symlinks
are not followed), with a bounded walk.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydsh.apps.web.errors import ApiError, not_found

MAX_PATH = 4096
MAX_NAME = 255
MAX_FOLDERS = 500
MAX_QUERY = 200
FILE_MATCHES = 50
WALK_LIMIT = 20_000
"""Entries a file search looks at before it stops (a huge tree answers with what it found, ``truncated``)."""
SKIPPED = frozenset({"node_modules", "__pycache__"})
BAD_TEXT = re.compile(r"[\x00-\x1f\x7f\ufffd\ud800-\udfff]")


def browse(raw: str | None, roots: list[str]) -> dict[str, Any]:
    """``{path, name, parent, roots, directories: [{name, path}], truncated}`` of one folder (home by default);
    ``roots`` in the order given (the routes put home first)."""
    fenced = [os.path.realpath(r) for r in dict.fromkeys(roots) if r]
    real = os.path.realpath(_checked(raw or "~"))
    if not any(_inside(real, root) for root in fenced):
        raise ApiError(403, "outside_roots", "Only folders inside your home folder or a workspace can be browsed.")
    try:
        entries = list(os.scandir(real))
    except FileNotFoundError:
        raise not_found("That folder") from None
    except NotADirectoryError:
        raise ApiError(422, "not_a_directory", "That path is not a folder.") from None
    except OSError:
        raise ApiError(403, "unreadable", "That folder cannot be read.") from None
    folders = sorted(
        ({"name": e.name, "path": os.path.join(real, e.name)} for e in entries if _listable(e, fenced)),
        key=lambda f: (f["name"].casefold(), f["name"]),
    )
    parent = os.path.dirname(real)
    return {
        "path": real,
        "name": os.path.basename(real) or real,
        "parent": parent if parent != real and any(_inside(parent, root) for root in fenced) else None,
        "roots": fenced,
        "directories": folders[:MAX_FOLDERS],
        "truncated": len(folders) > MAX_FOLDERS,
    }


def _checked(raw: str) -> str:
    """``raw`` with ``~`` expanded, or 422 ``invalid_path`` for a path no folder can have."""
    if len(raw) > MAX_PATH:
        raise ApiError(422, "invalid_path", f"The path is longer than {MAX_PATH} characters.")
    if BAD_TEXT.search(raw):
        raise ApiError(422, "invalid_path", "The path holds a control character or text that is not valid Unicode.")
    path = os.path.expanduser(raw)
    if not os.path.isabs(path):
        raise ApiError(422, "invalid_path", "The path must be absolute or start with ~.")
    if any(len(part.encode()) > MAX_NAME for part in Path(path).parts):
        raise ApiError(422, "invalid_path", f"A folder name in the path is longer than {MAX_NAME} bytes.")
    return path


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _listable(entry: os.DirEntry[str], roots: list[str]) -> bool:
    """A visible folder with a valid Unicode name whose target stays inside the roots."""
    if entry.name.startswith(".") or not _unicode(entry.name):
        return False
    try:
        if not entry.is_dir():
            return False
        return not entry.is_symlink() or any(_inside(os.path.realpath(entry.path), r) for r in roots)
    except OSError:
        return False


def _unicode(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def find_files(root: str, query: str) -> dict[str, Any]:
    """``{files: [workspace-relative path], truncated}``: files whose path contains ``query`` (any case),
    names starting with it first, then shorter paths; at most 50."""
    if len(query) > MAX_QUERY:
        raise ApiError(422, "invalid_query", f"The search text is longer than {MAX_QUERY} characters.")
    needle = query.casefold()
    found: list[str] = []
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED and _unicode(d))
        rel = os.path.relpath(folder, root)
        for name in sorted(files):
            seen += 1
            path = name if rel == "." else f"{rel}/{name}"
            if not name.startswith(".") and _unicode(path) and needle in path.casefold():
                found.append(path)
        if seen >= WALK_LIMIT:
            break
    found.sort(key=lambda p: (not os.path.basename(p).casefold().startswith(needle), len(p), p))
    return {"files": found[:FILE_MATCHES], "truncated": seen >= WALK_LIMIT or len(found) > FILE_MATCHES}
