"""What a session list shows of one session, folded event by event (spec 02 §11.2, spec 12 §4.1).

The session index keeps one fold per stored log, the web app one per live session. The fold is
total: malformed data of a log it reads without validation is skipped, never raised, since the log
and not the fold is the source of truth.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from pydsh.session.events import Event
from pydsh.session.title import TITLE

Fallback = Callable[[list[Event]], tuple[str, int] | None]
"""``session_title.fallback_for``: the fallback title of the first eligible prompt and its seq."""

DATA_TYPES = frozenset(
    {
        "agent/inbox/spliced",
        "assistant/message",
        "request/header",
        "model/selection",
        "permission/preset",
        "session/end-seed",
        "session/title",
        "user/message",
    }
)
"""Event types whose ``data`` the fold reads; every other event counts by its type and time alone."""
USAGE_KEYS = ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens")


@dataclass
class SummaryFold:
    """Counters, last-wins values and the title of one session, advanced event by event."""

    turns: int = 0
    steps: int = 0
    tokens: int = 0
    updated_at: int = 0
    last_seq: int = -1
    model: dict[str, Any] = field(default_factory=dict)
    permission_preset: str | None = None
    title: dict[str, Any] | None = None
    """The ``session/title`` fold (``TITLE``): the latest title, pinned by a user rename."""
    prompt: dict[str, Any] | None = None
    """``{title, seq, time}``: the fallback title of the first eligible prompt, kept while no title is logged."""
    inbox: dict[str, list[bool]] = field(default_factory=lambda: {"next-turn": [], "next-step": []})
    """The inbox the log keeps (``InboxState``), each waiting message as whether the user wrote it: an offline
    session's kept prompts are counted in lists without reading its log."""

    def reads(self, etype: str) -> bool:
        """Whether :meth:`apply` needs the data of an event of this type (the index parses only those)."""
        if etype == "user/message":
            return self.title is None and self.prompt is None
        return etype in DATA_TYPES

    def apply(self, event: Event, fallback: Fallback | None = None) -> None:
        """Advance by one event; ``data`` is only looked at for the types :meth:`reads` names."""
        etype = event["type"]
        self._count(etype)
        self.last_seq = event["seq"]
        moment = event.get("time")
        if type(moment) is int:
            self.updated_at = max(self.updated_at, moment)
        if self.reads(etype):
            data = event.get("data")
            if isinstance(data, Mapping):
                self._read(etype, event, data, fallback)

    def skip(self, etype: str) -> None:
        """Advance by the next event when only its type is known (one :meth:`reads` does not need)."""
        self._count(etype)
        self.last_seq += 1

    def _count(self, etype: str) -> None:
        """Count a turn or a step (what needs the type alone)."""
        if etype == "turn/start":
            self.turns += 1
        elif etype == "step/start":
            self.steps += 1

    def _read(self, etype: str, event: Event, data: Mapping[str, Any], fallback: Fallback | None) -> None:
        """The data-bearing part of :meth:`apply`."""
        if etype == "assistant/message" and isinstance(data.get("usage"), Mapping):
            self.tokens += sum(_count(data["usage"].get(key)) for key in USAGE_KEYS)
        elif etype == "request/header":
            header = data.get("header")
            config = header.get("config") if isinstance(header, Mapping) else None
            if isinstance(config, Mapping):
                self.model = route(config.get("provider"), config.get("model"), config.get("reasoningEffort"))
        elif etype == "model/selection" and data.get("model"):
            self.model = route(data.get("provider"), data.get("model"), data.get("reasoningEffort"))
        elif etype == "permission/preset" and isinstance(data.get("preset"), str):
            self.permission_preset = data["preset"]
        elif etype == "session/title" and _title_shaped(data):
            self.title = TITLE.fold(self.title, event)
        elif etype in ("agent/inbox/spliced", "session/end-seed") and not event.get("ignorable"):
            self._splice(etype, data)
        elif etype == "user/message" and fallback is not None:
            found = fallback([event])
            if found is not None:
                self.prompt = {"title": found[0], "seq": found[1], "time": event.get("time")}

    def _splice(self, etype: str, data: Mapping[str, Any]) -> None:
        """Follow the kept inbox: a splice, or an inherited seed's end, which empties it (as ``InboxState``)."""
        if etype == "session/end-seed":
            if data.get("inherited"):
                self.inbox = {"next-turn": [], "next-step": []}
            return
        items = self.inbox.get(str(data.get("target")))
        start, removed, inserted = data.get("start"), data.get("removedCount", 0), data.get("inserted")
        if items is None or type(start) is not int or type(removed) is not int or not isinstance(inserted, list):
            return
        if start >= 0 and removed >= 0 and start + removed <= len(items):
            items[start : start + removed] = [_from_user(m) for m in inserted]

    def queued(self) -> int:
        """How many of the user's prompts the kept inbox holds."""
        return sum(sum(items) for items in self.inbox.values())

    def stats(self) -> dict[str, int]:
        """``{turns, steps, tokens}`` (``SessionSummary.stats``)."""
        return {"turns": self.turns, "steps": self.steps, "tokens": self.tokens}

    def title_text(self) -> str | None:
        """The logged title, else the fallback of the first prompt, else ``None``."""
        if self.title is not None:
            return str(self.title["title"])
        return str(self.prompt["title"]) if self.prompt is not None else None

    def title_snapshot(self) -> dict[str, Any] | None:
        """The title snapshot of ``session_query.read_title`` (02 §11.1): logged, else the fallback."""
        if self.title is not None:
            return dict(self.title)
        if self.prompt is None:
            return None
        return {
            "title": self.prompt["title"],
            "messageSeqs": [self.prompt["seq"]],
            "source": {"kind": "fallback"},
            "eventSeq": None,
            "updatedAt": self.prompt["time"],
        }

    def state(self) -> dict[str, Any]:
        """A JSON value from which :meth:`restore` rebuilds this fold."""
        return {f.name: getattr(self, f.name) for f in fields(SummaryFold)}

    @classmethod
    def restore(cls, state: Mapping[str, Any]) -> SummaryFold:
        """The fold :meth:`state` described (unknown keys are ignored, missing ones take their defaults)."""
        known = {f.name for f in fields(SummaryFold)}
        return cls(**{key: value for key, value in state.items() if key in known})


def route(provider: Any, model: Any, effort: Any) -> dict[str, Any]:
    """``{provider, model, effort?}`` of a logged route."""
    out: dict[str, Any] = {"provider": provider, "model": model}
    if effort:
        out["effort"] = effort
    return out


def _from_user(message: Any) -> bool:
    """Whether an inbox message is a prompt the user wrote (``source.kind`` ``user``)."""
    source = message.get("source") if isinstance(message, Mapping) else None
    return isinstance(source, Mapping) and source.get("kind") == "user"


def _count(value: Any) -> int:
    """A token count as logged, 0 when it is not an integer."""
    return value if type(value) is int else 0


def _title_shaped(data: Mapping[str, Any]) -> bool:
    """Whether a ``session/title`` payload has what the ``TITLE`` fold reads."""
    return (
        isinstance(data.get("title"), str)
        and isinstance(data.get("messageSeqs"), list | tuple)
        and isinstance(data.get("source"), Mapping)
    )
