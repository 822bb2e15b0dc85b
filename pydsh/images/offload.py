"""Image offload, as DeepSeek Harness's ``compaction-image-offload`` does it: when the images a request would
carry exceed the route's budget, the oldest still-retained occurrences are omitted for good by one logged
decision, ``image/offload`` ``{targets: [{seq, imageIndexes}]}`` (the input event and the positions of its
images, counting offloaded ones too). Every later request on every route shows them as a placeholder naming
the stored copy, so the decision is rebuilt from the log alone.

The reference's adapter refuses the over-budget request and the plugin logs the decision before the retry,
without a retry record; pydsh checks before sending, which logs the same record at the same point.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydsh.session.events import Event
from pydsh.session.log import Session
from pydsh.session.surface import derive_event_message

RECORD = "image/offload"
INPUTS = ("user/message", "tool/result")


@dataclass(frozen=True)
class Budget:
    """What one request may carry inline (the reference's DeepSeek defaults for base64 images), and the
    steps in which an excess is removed, so one decision makes room for a while."""

    max_images: int = 600
    max_bytes: int = 20 * 1024 * 1024
    count_quantum: int = 20
    byte_quantum: int = 10 * 1024 * 1024


class Offloaded:
    """The session fold of ``image/offload`` decisions: input event seq → offloaded image indexes."""

    key = "images.offloaded"

    def init(self) -> dict[int, frozenset[int]]:
        return {}

    def fold(self, state: dict[int, frozenset[int]], event: Event) -> dict[int, frozenset[int]]:
        if event["type"] != RECORD:
            return state
        merged = dict(state)
        for target in event["data"]["targets"]:
            merged[target["seq"]] = merged.get(target["seq"], frozenset()) | frozenset(target["imageIndexes"])
        return merged


OFFLOADED = Offloaded()


def base64_length(size: int) -> int:
    """The length of ``size`` bytes in base64 (what an inline image costs the request)."""
    return 4 * ((size + 2) // 3)


def excess(lengths: list[int], budget: Budget) -> int:
    """How many of the oldest retained images (their request lengths, oldest first) must go so the rest fit:
    the excess rounded up to whole quanta of count and bytes (0 when everything fits)."""
    over_count = max(0, len(lengths) - budget.max_images)
    over_bytes = max(0, sum(lengths) - budget.max_bytes)
    if not over_count and not over_bytes:
        return 0
    remove_count = -(-over_count // budget.count_quantum) * budget.count_quantum
    remove_bytes = -(-over_bytes // budget.byte_quantum) * budget.byte_quantum
    count = removed = 0
    for length in lengths:
        enough_bytes = removed >= remove_bytes if budget.byte_quantum == 1 else removed > remove_bytes
        if count >= remove_count and (not remove_bytes or enough_bytes):
            break
        removed += length
        count += 1
    return count


def inputs(session: Session) -> Iterator[tuple[int, dict[str, Any]]]:
    """The surface's input events (user messages and tool results) with their messages, in request order."""
    for seq in session.surface.nodes:
        event = session.events[seq]
        message = derive_event_message(event) if event["type"] in INPUTS else None
        if message is not None:
            yield seq, message


def images(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in message.get("content") or () if b.get("type") == "image"]


def marks(session: Session) -> dict[int, frozenset[int]]:
    """Offloaded image indexes by the identity of the logged message they belong to."""
    state: dict[int, frozenset[int]] = session.fold(OFFLOADED)
    return {id(message): state[seq] for seq, message in inputs(session) if seq in state}


def retained_lengths(session: Session) -> list[int]:
    """The request length of every image not offloaded yet, oldest first."""
    state: dict[int, frozenset[int]] = session.fold(OFFLOADED)
    lengths = []
    for seq, message in inputs(session):
        gone = state.get(seq, frozenset())
        lengths += [base64_length(b["attachment"]["bytes"]) for i, b in enumerate(images(message)) if i not in gone]
    return lengths


def offload_oldest(session: Session, count: int) -> bool:
    """Log one decision omitting the ``count`` oldest retained images; whether any remained to omit."""
    state: dict[int, frozenset[int]] = session.fold(OFFLOADED)
    targets = []
    for seq, message in inputs(session):
        if not count:
            break
        gone = state.get(seq, frozenset())
        chosen = [i for i in range(len(images(message))) if i not in gone][:count]
        count -= len(chosen)
        if chosen:
            targets.append({"seq": seq, "imageIndexes": chosen})
    if not targets:
        return False
    session.append(RECORD, {"targets": targets})
    return True


def fit(session: Session, budget: Budget) -> None:
    """Offload the oldest images when the retained ones exceed ``budget`` (before a request is sent)."""
    needed = excess(retained_lengths(session), budget)
    if needed:
        offload_oldest(session, needed)
