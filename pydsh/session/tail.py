"""The last turns of a stored log read from its last lines: what a frontend draws first of a long session.

The log's lines are split once and only the events of its last turns are decoded, the repair closers of
an open tail turn included, so they are what the full read gives for the same lines (decoding and admitting
every event of a 10,000-event log takes about half a second). ``None`` when a line it needs does not parse:
the caller then reads the whole log, whose rules say what a damaged log is. The web's first open of a
session and the terminal's ``--resume`` both draw from it.
"""

from __future__ import annotations

from pathlib import Path

from pydsh.session.errors import SessionError
from pydsh.session.events import Event, collector_paused
from pydsh.session.persistence.jsonl import ZSTD, Decoder, log_lines, open_log
from pydsh.session.repair import tail_turn_closers


def stored_lines(path: Path) -> list[bytes]:
    """The complete lines of a stored log, header first (blocking)."""
    with open_log(path) as fh:
        data = fh.read()
    return [line for _offset, line in log_lines(data, path, path.name == ZSTD)[0]]


def line_type(line: bytes) -> str | None:
    """The event type of a line written with ``type`` first (as every log writer does), else ``None``."""
    if not line.startswith(b'{"type":"'):
        return None
    raw = line[9 : line.find(b'"', 9)]
    return raw.decode("ascii") if raw and raw.isascii() and b"\\" not in raw else None


def tail(
    path: Path, turns: int, least: int, *, lines: list[bytes] | None = None, start: int | None = None
) -> tuple[list[Event], int, int] | None:
    """``(events, index of the first, last seq)``: the events of the last ``turns`` turns and at least the
    last ``least`` events, from a ``turn/start`` (or the first event), the repair closers of an open tail turn
    included, as the full read gives them (blocking); ``None``: read it whole. ``start`` skips the search."""
    try:
        lines = stored_lines(path) if lines is None else lines
    except SessionError:
        return None
    types = [line_type(line) for line in lines[1:]]
    if None in types:
        return None
    last_start = start if start is not None else _nth_start(types, 1)
    decoded = _decode(lines, last_start)
    if decoded is None:
        return None
    closers = tail_turn_closers(decoded) if decoded else []
    total = len(types) + len(closers)
    first = start if start is not None else min(_nth_start(types, turns), _start_before(types, total - least))
    if first < last_start:
        head = _decode(lines, first, last_start)
        if head is None:
            return None
        decoded = head + decoded
    return decoded + closers, first, total - 1


def _decode(lines: list[bytes], first: int, end: int | None = None) -> list[Event] | None:
    """Events ``first`` to ``end`` decoded as the full read decodes them, ``None`` at a damaged line."""
    decoder = Decoder()
    stop = len(lines) - 1 if end is None else end
    try:
        with collector_paused():
            return [decoder.event(lines[seq + 1], seq) for seq in range(first, stop)]
    except SessionError:
        return None


def _nth_start(types: list[str | None], n: int) -> int:
    """Index of the ``n``-th last ``turn/start`` (0 when there are fewer)."""
    seen = 0
    for i in range(len(types) - 1, -1, -1):
        if types[i] == "turn/start":
            seen += 1
            if seen == n:
                return i
    return 0


def _start_before(types: list[str | None], index: int) -> int:
    """The nearest ``turn/start`` at or before ``index`` (0 when there is none)."""
    for i in range(min(index, len(types) - 1), -1, -1):
        if types[i] == "turn/start":
            return i
    return 0
