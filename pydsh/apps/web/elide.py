"""What the page is sent of a long answer's event: its stream record without the texts the message repeats.

An ``assistant/message`` event holds its text three times: the message's content, the stream record's
``*-chunks`` texts and its ``block-end`` blocks. The page draws the content and reads only the stream's
times (time to first token), so for a long answer it would parse the text twice more for nothing: a 5 MB
answer's event was a 16 MB frame, parsed in one main-thread task. Above :data:`ELIDE_ABOVE` characters of
stream text the page gets the stream with each chunk record's texts replaced by their count and length and
each block-end block by its type, and ``streamElided: true`` on the event's data (the inspector says so
and points to the log download, which is the event as written). Smaller events are sent as logged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ELIDE_ABOVE = 32_768
"""Characters of stream text above which the page gets the event's stream without them."""
CHUNK_RECORDS = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})


def for_page(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """``event`` as the page is sent it: unchanged, or a long answer's with its stream texts elided."""
    if event.get("type") != "assistant/message":
        return event
    data = event.get("data")
    stream = data.get("stream") if isinstance(data, Mapping) else None
    if not isinstance(stream, list) or _stream_chars(stream) <= ELIDE_ABOVE:
        return event
    assert isinstance(data, Mapping)
    return {**event, "data": {**data, "stream": [_elided(record) for record in stream], "streamElided": True}}


def _stream_chars(stream: list[Any]) -> int:
    """Characters of text the stream's chunk records carry."""
    total = 0
    for record in stream:
        if isinstance(record, Mapping) and record.get("type") in CHUNK_RECORDS:
            texts = record.get("texts")
            if isinstance(texts, list):
                total += sum(len(t) for t in texts if isinstance(t, str))
    return total


def _elided(record: Any) -> Any:
    """One stream record without its texts (its times and indexes kept)."""
    if not isinstance(record, Mapping):
        return record
    if record.get("type") in CHUNK_RECORDS:
        texts = record.get("texts")
        texts = texts if isinstance(texts, list) else []
        kept = {k: v for k, v in record.items() if k not in ("texts", "dt")}
        return {**kept, "chunks": len(texts), "chars": sum(len(t) for t in texts if isinstance(t, str))}
    chunk = record.get("chunk")
    if isinstance(chunk, Mapping) and chunk.get("type") == "block-end" and isinstance(chunk.get("block"), Mapping):
        return {**record, "chunk": {**chunk, "block": {"type": chunk["block"].get("type"), "elided": True}}}
    return record
