"""The compaction seam: the ``compaction`` service protocol, its errors and utilities (spec 10 §4.1).

The utilities read only the session log: tool-pairing balance over the surface, the open
compaction (the lock), and the checkpoint message's source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydsh.kernel.errors import PydshError

if TYPE_CHECKING:
    from pydantic_core import PydanticCustomError

    from pydsh.kernel.cancel import AbortSignal
    from pydsh.session.log import Session

Trigger = Literal["pressure", "context-overflow"]

MANUAL_MESSAGES = {
    "busy": "manual compaction requires an idle agent with no waking queued work",
    "cancelled": "manual compaction was cancelled",
    "changed": "the compacted history changed during manual compaction",
    "summary": "manual compaction could not produce a smaller summary",
    "commit": "manual compaction did not commit cleanly",
    "persistence": "manual compaction durability checkpoint failed",
}


def config_error(message: str) -> PydanticCustomError:
    """A validation error whose text is exactly ``message`` (no "Value error, " prefix)."""
    from pydantic_core import PydanticCustomError

    return PydanticCustomError("compaction_config", "{message}", {"message": message})


class CompactionError(PydshError):
    """A compaction that could not run or commit; the history is unchanged unless stated."""


class ManualCompactionError(CompactionError):
    """``busy`` | ``cancelled`` | ``changed`` | ``summary`` | ``commit`` | ``persistence`` (§4.8)."""

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message or MANUAL_MESSAGES[code])
        self.code = code


class SurfaceChangedError(CompactionError):
    """The surface moved while the summariser ran; nothing was committed."""

    def __init__(self) -> None:
        super().__init__("compaction: session surface changed during summarization")


class TargetPressureConfigError(CompactionError):
    """The routed target's budgets make compaction impossible (missing window, non-positive budgets)."""


class SummaryError(CompactionError):
    """The summariser produced nothing usable (empty, truncated, images, not smaller)."""

    def __init__(self, message: str, code: str = "COMPACTION_SUMMARY") -> None:
        super().__init__(message)
        self.code = code


class Compaction(Protocol):
    """The ``compaction`` service (spec 10 §4.1)."""

    async def compact_if_needed(self, agent: Any, trigger: Trigger, signal: AbortSignal | None) -> Any: ...

    async def compact_now(
        self, agent: Any, signal: AbortSignal | None, source_command_id: str | None = None
    ) -> Any: ...

    async def compact_region(self, start: int, end: int, agent: Any, signal: AbortSignal | None = None) -> Any: ...


def pairing_counts(session: Session) -> list[int]:
    """Running count of unanswered tool calls after each surface node (``+n`` per call block, ``-1`` per result)."""
    events = session.events
    count = 0
    out: list[int] = []
    for seq in session.surface.nodes:
        event = events[seq]
        etype = event["type"]
        if etype == "assistant/message":
            count += sum(1 for b in event["data"]["message"]["content"] if b.get("type") == "tool-call")
        elif etype == "tool/result":
            count -= 1
        out.append(count)
    return out


def tool_pairing_balanced_before(session: Session, seq: int) -> bool:
    """Whether the cut just before surface node ``seq`` crosses no unanswered tool call."""
    index = session.surface.nodes.index(seq)
    return index == 0 or pairing_counts(session)[index - 1] == 0


def tool_pairing_balanced_after(session: Session, seq: int) -> bool:
    """Whether the cut just after surface node ``seq`` crosses no unanswered tool call."""
    return pairing_counts(session)[session.surface.nodes.index(seq)] == 0


def compact_checkpoint_source(compaction_id: str, source_command_id: str | None = None) -> dict[str, Any]:
    """The ``source`` of a checkpoint message."""
    source: dict[str, Any] = {"kind": "compact-checkpoint", "compactionId": compaction_id}
    if source_command_id is not None:
        source["sourceCommandId"] = source_command_id
    return source


def open_compaction(session: Session) -> dict[str, Any] | None:
    """The data of a ``compaction/start`` of this lifecycle with no ``compaction/end`` (the lock), or ``None``.

    A bracket opened before the latest ``session/end-seed`` belongs to a dead lifecycle (02 §10.1).
    """
    events = session.events
    marker = session.lifecycle_start
    for seq in range(len(events) - 1, marker - 1, -1):
        etype = events[seq]["type"]
        if etype == "compaction/end":
            return None
        if etype == "compaction/start":
            return dict(events[seq]["data"])
    return None
