"""What a run left in the log: its final text, finish reason, usage and closing message (spec 06 §9).

One reading for every frontend and the SDK client: ``final_response`` is the text of the *last*
``assistant/message`` (``""`` when that message has no text, e.g. an interrupted reasoning-only
one), ``finish_reason`` the reason kind of the last ``turn/end``. Events are plain or frozen
envelopes, trusted or not: anything malformed reads as absent, except a ``turn/end`` whose kind is
not a string, which raises :class:`ValueError` (the SDK client turns it into a protocol error).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Events = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class RunOutcome:
    """The result fields of a window of a session's events."""

    final_response: str
    finish_reason: str | None
    usage: dict[str, int]
    error: dict[str, Any] | None


def _message(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The message of an ``assistant/message`` (``data.message``, or ``data`` itself) with list content."""
    data = event.get("data")
    if not isinstance(data, Mapping):
        return None
    owner = data["message"] if isinstance(data.get("message"), Mapping) else data
    return owner if isinstance(owner.get("content"), list) else None


def _texts(blocks: Iterable[Any]) -> str:
    return "".join(str(b.get("text") or "") for b in blocks if isinstance(b, Mapping) and b.get("type") == "text")


def final_response(events: Events) -> str:
    """Text blocks of the last ``assistant/message`` whose content is a list, joined (``""`` when none)."""
    for event in reversed(events):
        if event.get("type") == "assistant/message":
            message = _message(event)
            if message is not None:
                return _texts(message["content"])
    return ""


def last_reason(events: Events) -> Mapping[str, Any] | None:
    """``data.reason`` of the last ``turn/end`` (``None`` when there is none)."""
    for event in reversed(events):
        if event.get("type") == "turn/end":
            data = event.get("data")
            reason = data.get("reason") if isinstance(data, Mapping) else None
            return reason if isinstance(reason, Mapping) else {}
    return None


def finish_reason(events: Events) -> str | None:
    """The reason kind of the last ``turn/end``; ``ValueError`` when that kind is not a string."""
    reason = last_reason(events)
    if reason is None:
        return None
    kind = reason.get("kind")
    if not isinstance(kind, str):
        raise ValueError("turn/end event requires a string data.reason.kind")
    return kind


def usage(events: Events) -> dict[str, int]:
    """Token usage of every ``assistant/message``, summed per bucket."""
    total: dict[str, int] = {}
    for event in events:
        if event.get("type") != "assistant/message":
            continue
        data = event.get("data")
        counts = data.get("usage") if isinstance(data, Mapping) else None
        for key, value in (counts or {}).items():
            if type(value) is int:
                total[key] = total.get(key, 0) + value
    return total


def read_outcome(events: Events) -> RunOutcome:
    """Final text, finish reason, summed usage and the last turn's error of ``events``."""
    reason = last_reason(events)
    error = reason.get("error") if reason is not None else None
    return RunOutcome(
        final_response=final_response(events),
        finish_reason=finish_reason(events),
        usage=usage(events),
        error=dict(error) if isinstance(error, Mapping) else None,
    )


def closing_content(events: Events) -> list[dict[str, Any]]:
    """The last assistant message's non-empty blocks, from the newest message that has any (spec 07 §5.4)."""
    for event in reversed(events):
        if event.get("type") == "assistant/message":
            message = _message(event)
            blocks = [dict(b) for b in message["content"] if b.get("text")] if message is not None else []
            if blocks:
                return blocks
    return []
