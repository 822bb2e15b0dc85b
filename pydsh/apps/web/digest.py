"""A stored session opened without reading all of it: what the first paint of a long session needs.

Opening a stored session used to parse, validate and fold every event of its log before the page got
its detail and its last turns (half a second for 10,000 events). Here the log's lines are split once
and only what is asked for is parsed: the events of its last turns (``pydsh.session.tail``, which the
terminal shares), or the lines whose data a summary reads (``digest``: the session fold, the kept inbox,
the latest request header). Both give what the full read gives for the same log (the tests compare them
on real logs); the token meter folds every event, so a digest leaves it to the full read, which the
session's stream makes next.

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
from pydsh.session.persistence.jsonl import decode_header
from pydsh.session.summary import Fallback
from pydsh.session.tail import line_type, stored_lines, tail

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
        lines = stored_lines(path)
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
            etype = line_type(line)
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
