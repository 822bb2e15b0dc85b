"""Every rule an event must satisfy to join a log, checked on append and on read alike (spec 02 §13).

:class:`LogRules` folds the log as it grows: envelope and lossless data, the surface (via
:class:`~pydsh.session.surface.Surface`), turn/step placement, tool call/result pairing and
the inherited-prefix marker. A violation is a :class:`SessionLogError` naming the seq.
"""

from __future__ import annotations

from typing import Any

from pydsh.session import payloads as _payloads  # noqa: F401  (registers the vocabulary)
from pydsh.session.errors import SessionLogError
from pydsh.session.events import SURFACE_TYPES, Event, payload_problem
from pydsh.session.surface import Surface

IN_TURN = frozenset(
    {
        "step/start",
        "step/end",
        "assistant/message",
        "assistant/attempt",
        "tool/call",
        "tool/result",
        "request/header",
        "request/context",
        "todo/write",
        "approval/asked",
    }
)
IN_STEP = frozenset({"assistant/message", "assistant/attempt", "tool/call"})


class Placement:
    """Turn/step bookkeeping of a log (02 §13 rules 2–7)."""

    def __init__(self) -> None:
        self.open_turn: int | None = None
        self.last_turn = 0
        self.open_step: int | None = None
        self.last_step = 0
        self.step_calls: dict[str, int] = {}

    def problem(self, event: Event) -> str | None:
        etype = event["type"]
        data = event["data"]
        if etype == "turn/start":
            if self.open_turn is not None:
                return f"turn/start while turn {self.open_turn} is open"
            if data["turn"] != self.last_turn + 1:
                return f"turn/start numbers turn {data['turn']}, expected {self.last_turn + 1}"
            return None
        if etype in IN_TURN and self.open_turn is None:
            return f"{etype} outside an open turn"
        if etype == "turn/end":
            if data["turn"] != self.open_turn:
                return f"turn/end for turn {data['turn']} but the open turn is {self.open_turn}"
            if self.open_step is not None:
                return f"turn/end while step {self.open_step} is open"
            return None
        if etype == "step/start":
            if self.open_step is not None:
                return f"step/start while step {self.open_step} is open"
            if data["turn"] != self.open_turn or data["step"] != self.last_step + 1:
                return f"step/start {data['turn']}/{data['step']} does not follow {self.open_turn}/{self.last_step}"
            return None
        if etype == "step/end":
            if self.open_step is None or (data["turn"], data["step"]) != (self.open_turn, self.open_step):
                return f"step/end {data['turn']}/{data['step']} does not match the open step"
            return None
        if etype in IN_STEP or (etype == "tool/result" and event.get("surfaceOp") == "append"):
            return self._stepped_problem(etype, data)
        return None

    def _stepped_problem(self, etype: str, data: Any) -> str | None:
        if self.open_step is None or (data["turn"], data["step"]) != (self.open_turn, self.open_step):
            return f"{etype} names {data['turn']}/{data['step']}, not the open step"
        if etype == "tool/result":
            call_id = data["message"]["toolCallId"]
            error = data.get("error") or {}
            if call_id not in self.step_calls and error.get("code") != "TOOL_NOT_STARTED":
                return f'tool/result for "{call_id}" has no tool/call in this step'
        return None

    def apply(self, event: Event) -> None:
        etype = event["type"]
        data = event["data"]
        if etype == "turn/start":
            self.open_turn = self.last_turn = data["turn"]
            self.last_step = 0
            self.step_calls = {}
        elif etype == "turn/end":
            self.open_turn = None
            self.step_calls = {}
        elif etype == "step/start":
            self.open_step = self.last_step = data["step"]
            self.step_calls = {}
        elif etype == "step/end":
            self.open_step = None
            self.step_calls = {}
        elif etype == "tool/call":
            self.step_calls[data["callId"]] = event["seq"]


class CompactionBracket:
    """Rule 10 (02 §13): ``compaction/start``/``summary``/``end`` pair up; the checkpoint follows its summary.

    A bracket still open at a ``session/end-seed`` belongs to a dead lifecycle and is dropped.
    """

    def __init__(self) -> None:
        self.open: dict[str, Any] | None = None
        self.summary_seq: int | None = None

    def problem(self, event: Event, open_turn: int | None) -> str | None:
        etype = event["type"]
        data = event["data"]
        opened = self.open
        if etype == "compaction/start":
            if opened is not None:
                return f"compaction/start while compaction {opened['compactionId']} is open"
            turn = data.get("turn")
            if turn != open_turn:
                return f"compaction/start names turn {turn} but the open turn is {open_turn}"
            return None
        if etype in ("compaction/summary", "compaction/end"):
            if opened is None or data.get("compactionId") != opened["compactionId"]:
                return f"{etype} {data.get('compactionId')} does not match an open compaction"
            if etype == "compaction/summary" and self.summary_seq is not None:
                return f"second compaction/summary for compaction {opened['compactionId']}"
            return None
        if etype == "user/message" and (data.get("source") or {}).get("kind") == "compact-checkpoint":
            if event.get("surfaceOp") == "append":
                return "a compact-checkpoint message must replace the span it summarises"
            if opened is None or data["source"].get("compactionId") != opened["compactionId"]:
                return "the checkpoint replace does not match the open compaction"
            if self.summary_seq != event["seq"] - 1:
                return "the checkpoint replace must immediately follow its compaction/summary"
        return None

    def apply(self, event: Event) -> None:
        etype = event["type"]
        if etype == "compaction/start":
            self.open, self.summary_seq = dict(event["data"]), None
        elif etype == "compaction/summary":
            self.summary_seq = event["seq"]
        elif etype in ("compaction/end", "session/end-seed"):
            self.open, self.summary_seq = None, None


class LogRules:
    """The fold that admits events into one log."""

    def __init__(self, events: list[Event], inherited_event_count: int = 0) -> None:
        self.events = events
        self.surface = Surface(events)
        self.placement = Placement()
        self.compaction = CompactionBracket()
        self.inherited_event_count = inherited_event_count
        self.last_marker: int | None = None
        self.last_inherited_marker: int | None = None

    def check(self, event: Event) -> None:
        """Raise :class:`SessionLogError` if ``event`` cannot be the next event."""
        seq = event["seq"]
        etype = event["type"]
        if not event.get("ignorable"):
            problem = payload_problem(etype, event["data"])
            if problem:
                raise SessionLogError(seq, f"{etype}: {problem}")
        if etype in SURFACE_TYPES:
            if "surfaceOp" not in event:
                raise SessionLogError(seq, f"{etype} is a surface type and needs surfaceOp")
            problem = self.surface.check(event)
        elif "surfaceOp" in event or "sourceEventSeqs" in event:
            problem = f"{etype} is not a surface type and must not carry surfaceOp or sourceEventSeqs"
        else:
            problem = None
        if problem is None and not event.get("ignorable"):
            problem = self.placement.problem(event) or self.compaction.problem(event, self.placement.open_turn)
        if problem:
            raise SessionLogError(seq, problem)

    def apply(self, event: Event) -> None:
        etype = event["type"]
        if etype in SURFACE_TYPES:
            self.surface.apply(event)
        if not event.get("ignorable"):
            self.placement.apply(event)
            self.compaction.apply(event)
        if etype == "session/end-seed":
            self.last_marker = event["seq"]
            if event["data"].get("inherited"):
                self.last_inherited_marker = event["seq"]

    def admit(self, event: Event) -> None:
        self.check(event)
        self.apply(event)

    def check_seed(self, is_seeded: bool) -> None:
        """The header's ``isSeeded`` must agree with the inherited marker (02 §2, §13.9)."""
        marker = self.last_inherited_marker
        if is_seeded and marker is None:
            raise SessionLogError(None, "isSeeded is true but no inherited session/end-seed exists")
        if not is_seeded and marker is not None:
            raise SessionLogError(marker, "isSeeded is false but an inherited session/end-seed exists")
        if is_seeded and marker != self.inherited_event_count:
            raise SessionLogError(
                marker, f"inherited marker at seq {marker} disagrees with prefix length {self.inherited_event_count}"
            )
