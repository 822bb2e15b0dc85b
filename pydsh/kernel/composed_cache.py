"""Composed profiles cached across processes, so a start-up with unchanged files skips YAML entirely.

An entry holds the row tree and warnings of one profile composition with the text of every file
it read (profile, patches, shipped bundles, included files; absent ones too). It is used only while
each of those files still has the same content, the request (profile, patch paths, extra bundles)
and the composing code are unchanged, and — when the result names ``$DSH_HOME`` — under the same
home. Files under ``$DSH_HOME`` are keyed relative to it, so a fresh home materialised from the same
templates hits the cache. Compositions with third-party bundles are never cached.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydsh.kernel import compose
from pydsh.kernel.compose import Composition, Row, dsh_home
from pydsh.kernel.discovery import cache_dir, read_json, write_json

HOME = "$DSH_HOME"
VERSION = 1


def request(name: str, patches: list[str], extra_bundles: tuple[str, ...]) -> list[Any]:
    """What a composition depends on besides file contents: the arguments and the composing code."""
    code = [_stat(Path(module)) for module in _composing_modules()]
    resolved = [str(Path(p).expanduser().resolve()) for p in patches]
    return [VERSION, name, list(patches), resolved, list(extra_bundles), code]


def _composing_modules() -> list[str]:
    """The kernel modules whose code shapes a composition (by path: importing them would cost start-up)."""
    kernel = Path(compose.__file__).parent
    return [str(kernel / f"{name}.py") for name in ("compose", "profiles", "reference")]


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _entry_path(name: str) -> Path:
    return cache_dir() / "profiles" / f"{name}.json"


@contextlib.contextmanager
def recording() -> Iterator[dict[str, str | None]]:
    """Record the files composing reads (``compose.READS``) for the duration of the block."""
    reads: dict[str, str | None] = {}
    saved, compose.READS = compose.READS, reads
    try:
        yield reads
    finally:
        compose.READS = saved


def _keyed(path: str, home: str) -> str:
    return HOME + path[len(home) :] if path.startswith(home + os.sep) else path


def _unkeyed(path: str, home: str) -> str:
    return home + path[len(HOME) :] if path.startswith(HOME + os.sep) else path


def store(req: list[Any], reads: dict[str, str | None], comp: Composition) -> None:
    """Keep ``comp`` for ``req``, unless its rows hold values JSON would not give back unchanged."""
    home = str(dsh_home())
    body = {"rows": [dataclasses.asdict(row) for row in comp.rows], "warnings": list(comp.warnings)}
    try:
        text = json.dumps(body, allow_nan=False)
    except (TypeError, ValueError):
        return
    if json.loads(text) != body:
        return
    entry = {
        "request": req,
        "home": home if _mentions(body, home) else None,
        "reads": sorted([_keyed(path, home), content] for path, content in reads.items()),
        **body,
    }
    write_json(_entry_path(req[1]), entry)


def _mentions(value: Any, text: str) -> bool:
    """Whether any string in ``value`` (keys included) contains ``text``."""
    if isinstance(value, str):
        return text in value
    if isinstance(value, dict):
        return any(_mentions(k, text) or _mentions(v, text) for k, v in value.items())
    if isinstance(value, list):
        return any(_mentions(v, text) for v in value)
    return False


def load(req: list[Any]) -> Composition | None:
    """The cached composition of ``req`` when every file it read is unchanged, else ``None``."""
    entry = read_json(_entry_path(req[1]))
    home = str(dsh_home())
    if entry is None or entry.get("request") != json.loads(json.dumps(req)) or entry.get("home") not in (None, home):
        return None
    try:
        for keyed, content in entry["reads"]:
            if _read_text(_unkeyed(keyed, home)) != content:
                return None
        rows = [_row(raw) for raw in entry["rows"]]
        warnings = [str(w) for w in entry["warnings"]]
    except (KeyError, TypeError, ValueError):
        return None
    return Composition(rows=rows, warnings=warnings)


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(path) from exc


def _row(raw: dict[str, Any]) -> Row:
    return Row(**{**raw, "children": [_row(child) for child in raw["children"]]})
