"""A stored session opened without reading all of it: what the first paint of a long session needs.

Opening a stored session used to parse, validate and fold every event of its log before the page got
its detail and its last turns (half a second for 10,000 events). Here the log's lines are split once
and only what is asked for is parsed: the events of its last turns (``tail``), or the lines whose data
a summary reads (``digest``: the session fold, the kept inbox, the latest request header). Both give
what the full read gives for the same log (the tests compare them on real logs); the token meter folds
every event, so a digest leaves it to the full read, which the session's stream makes next.

Either returns ``None`` when a line it needs does not parse as a log line: the caller then reads the
whole log, whose rules say what a damaged log is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydsh.agent.inbox import INBOX
from pydsh.apps.web.summary import SessionFold
from pydsh.contract.agent import UserMessage
from pydsh.session.errors import SessionError
from pydsh.session.events import Event, collector_paused
from pydsh.session.persistence.jsonl import ZSTD, Decoder, decode_header, log_lines, open_log
from pydsh.session.repair import tail_turn_closers
from pydsh.session.summary import Fallback

INBOX_TYPES = frozenset({"agent/inbox/spliced", "session/end-seed"})
"""Types the kept inbox folds (``InboxState``)."""


@dataclass
class Digest:
    """What ``GET /api/sessions/{id}`` shows of a stored session, folded from the lines that carry it."""

    header: dict[str, Any]
    last_seq: int
    """Seq of the last event, the repair closers of an open tail turn included."""
    fold: SessionFold
    inbox: dict[str, list[UserMessage]] = field(default_factory=dict)
    splices: list[Event] = field(default_factory=list)
    """The ``agent/inbox/spliced`` events (when each kept prompt was queued)."""
    last_header: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        return str(self.header["id"])

    def request_header(self) -> dict[str, Any] | None:
        """The latest logged request header (all a compaction budget reads of a session)."""
        return self.last_header


def _lines(path: Path) -> list[bytes]:
    """The complete lines of a stored log, header first (blocking)."""
    with open_log(path) as fh:
        data = fh.read()
    return [line for _offset, line in log_lines(data, path, path.name == ZSTD)[0]]


def _type_of(line: bytes) -> str | None:
    """The event type of a line written with ``type`` first (as every log writer does), else ``None``."""
    if not line.startswith(b'{"type":"'):
        return None
    raw = line[9 : line.find(b'"', 9)]
    return raw.decode("ascii") if raw and raw.isascii() and b"\\" not in raw else None


def _event(line: bytes, seq: int) -> Event | None:
    """A line parsed leniently (the fold's view of it), ``None`` when it is no event object."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("seq") != seq or type(event.get("time")) is not int:
        return None
    return event


def digest(path: Path, session_id: str, fallback: Fallback | None) -> Digest | None:
    """The summary of a stored log from the lines its folds read (blocking); ``None``: read it whole."""
    try:
        lines = _lines(path)
        header = decode_header(lines[0], path) if lines else None
    except SessionError:
        return None
    if header is None or header.get("id") != session_id:
        return None
    fold = SessionFold()
    inbox = INBOX.init()
    out = Digest(header, len(lines) - 2, fold, inbox)
    opened = -1
    """Index of the last ``turn/start`` after every ``turn/end``: an open tail turn gets repair closers."""
    with collector_paused():
        for seq, line in enumerate(lines[1:]):
            etype = _type_of(line)
            if etype is None:
                return None
            last = seq == len(lines) - 2
            if not (last or fold.reads(etype) or etype in INBOX_TYPES or etype == "request/header"):
                fold.skip(etype)
                opened = seq if etype == "turn/start" else -1 if etype == "turn/end" else opened
                continue
            event = _event(line, seq)
            if event is None:
                return None
            fold.apply(event, fallback)
            opened = seq if etype == "turn/start" else -1 if etype == "turn/end" else opened
            if etype in INBOX_TYPES and not event.get("ignorable"):
                inbox = INBOX.fold(inbox, event)
                if etype == "agent/inbox/spliced":
                    out.splices.append(event)
            elif etype == "request/header":
                out.last_header = event["data"]["header"]
    out.inbox = inbox
    if opened >= 0:
        found = tail(path, 0, 0, lines=lines, start=opened)
        if found is None:
            return None
        out.last_seq = found[2]
    return out


def tail(
    path: Path, turns: int, least: int, *, lines: list[bytes] | None = None, start: int | None = None
) -> tuple[list[Event], int, int] | None:
    """``(events, index of the first, last seq)``: the events of the last ``turns`` turns and at least the
    last ``least`` events, from a ``turn/start`` (or the first event), the repair closers of an open tail turn
    included, as the full read gives them (blocking); ``None``: read it whole. ``start`` skips the search."""
    try:
        lines = _lines(path) if lines is None else lines
    except SessionError:
        return None
    types = [_type_of(line) for line in lines[1:]]
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
