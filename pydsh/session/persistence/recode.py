"""``python -m pydsh.session.persistence.recode``: rewrite plain session logs as zstd, losing nothing.

DeepSeek Harness reads only the encoding it is configured for (zstd in all its profiles) and refuses
to start in a home that holds one plain ``session.v4.jsonl``. pydsh writes zstd in every profile
now; plain logs written before stay plain, since a resumed log keeps its encoding. This rewrites
them. For each plain log under the sessions root it takes the session's lock (a session another
process holds, pydsh or the reference, is left as it is), checks that the log reads back whole (one
with a torn tail or a damaged line is left as it is), writes the same lines beside it as checksummed
zstd frames (the header line alone, then batches of whole lines) in a temporary file, checks that
the new file decodes to exactly the old bytes, links it into place and only then removes the plain
file. A run interrupted between the two steps is finished by the next one.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydsh.session.errors import SessionAlreadyOwnedError, SessionError
from pydsh.session.persistence.jsonl import (
    LOCK,
    PLAIN,
    SMALL_BATCH,
    ZSTD,
    JsonlPersistence,
    acquire_lock,
    fsync_dir,
    log_text,
    parse_log,
    write_new_file,
)

PROG = "python -m pydsh.session.persistence.recode"


@dataclass(frozen=True)
class Outcome:
    """What became of one plain log: ``recoded``, ``would recode`` (dry run) or ``left`` with the reason."""

    path: Path
    done: bool
    what: str


def plain_logs(root: Path) -> Iterator[Path]:
    """Every plain log under ``root`` (``<root>/--<cwd key>--/<session>/session.v4.jsonl``), in path order."""
    if root.is_dir():
        yield from sorted(p for p in root.glob(f"*/*/{PLAIN}") if p.is_file() and not p.is_symlink())


def zstd_frames(store: JsonlPersistence, data: bytes) -> bytes:
    """``data`` (whole lines) as the reference writes a log: the header line alone, then batches of lines."""
    header_end = data.index(b"\n") + 1
    frames = [store.frame(data[:header_end], True)]
    start = header_end
    while start < len(data):
        end = data.rfind(b"\n", start, start + SMALL_BATCH) + 1 or data.index(b"\n", start) + 1
        frames.append(store.frame(data[start:end], True))
        start = end
    return b"".join(frames)


def problem(data: bytes, path: Path) -> str:
    """Why the plain log at ``path`` cannot be recoded as it is ("" when it reads back whole)."""
    try:
        stored = parse_log(data, path)
    except SessionError as exc:
        return f"it cannot be read ({exc})"
    if stored.damage is not None:
        return f"line {stored.damage.line} is damaged; resume the session once in pydsh, which sets it aside"
    if stored.torn_offset is not None:
        return "its last line is unfinished; resume the session once in pydsh, which cuts it"
    return ""


def recode(path: Path, store: JsonlPersistence, *, dry_run: bool) -> Outcome:
    """Rewrite one plain log as zstd under its session's lock; the plain file goes only once the copy is proven."""
    directory = path.parent
    try:
        lock = acquire_lock(directory / LOCK, directory.name)
    except SessionAlreadyOwnedError:
        return Outcome(path, False, "another process holds the session; run this again once it is closed")
    try:
        return _recode_locked(path, store, dry_run=dry_run)
    finally:
        os.close(lock)


def _recode_locked(path: Path, store: JsonlPersistence, *, dry_run: bool) -> Outcome:
    """:func:`recode` once the session's lock is held."""
    data = path.read_bytes()
    target = path.with_name(ZSTD)
    if target.exists():
        if log_text(target.read_bytes(), target, True) != data:
            return Outcome(path, False, f"{ZSTD} exists beside it with other content; compare the two by hand")
        if not dry_run:
            path.unlink()
            fsync_dir(path.parent)
        return Outcome(path, True, "finished an interrupted recode (the zstd copy was already whole)")
    why = problem(data, path)
    if why:
        return Outcome(path, False, why)
    if dry_run:
        return Outcome(path, True, "would recode")
    encoded = zstd_frames(store, data)
    if log_text(encoded, target, True) != data:
        return Outcome(path, False, "its zstd copy did not decode to the same bytes; nothing was changed")
    tmp = target.with_name(f"{ZSTD}.{os.urandom(6).hex()}.tmp")
    try:
        write_new_file(tmp, encoded)
        os.link(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    path.unlink()
    fsync_dir(path.parent)
    return Outcome(path, True, "recoded")


def run(root: Path, *, dry_run: bool) -> list[Outcome]:
    """Recode every plain log under ``root``; one outcome per log."""
    store = JsonlPersistence(root, compression="zstd")
    outcomes = []
    for path in plain_logs(root):
        try:
            outcomes.append(recode(path, store, dry_run=dry_run))
        except (OSError, SessionError) as exc:
            outcomes.append(Outcome(path, False, f"failed ({exc}); the plain log is unchanged"))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    """Command line: 0 when no plain log is left behind, 1 when one is (each named with why), 2 for usage."""
    from pydsh.kernel.compose import dsh_home

    parser = argparse.ArgumentParser(prog=PROG, description="Rewrite plain session logs as zstd, losing nothing.")
    parser.add_argument("root", nargs="?", type=Path, help="sessions directory (default: $DSH_HOME/sessions)")
    parser.add_argument("--dry-run", action="store_true", help="name the logs it would recode, change nothing")
    args = parser.parse_args(argv)
    root: Path = args.root if args.root is not None else dsh_home() / "sessions"
    outcomes = run(root, dry_run=args.dry_run)
    for outcome in outcomes:
        label = outcome.what if outcome.done else f"left as it is: {outcome.what}"
        print(f"{outcome.path}: {label}", file=sys.stdout if outcome.done else sys.stderr)
    left = sum(not o.done for o in outcomes)
    verb = "would be recoded" if args.dry_run else "recoded"
    print(f"{len(outcomes) - left} plain log(s) under {root} {verb}, {left} left as they are")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
