"""Server-Sent Events of ``pydsh web`` (spec 12 §4.3): framing, seq deduplication and the response.

Imported only by the web app (sse-starlette is part of the web stack).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from sse_starlette.sse import EventSourceResponse

from pydsh.apps.web.fanout import Frame, Subscriber

PING_S = 15


async def stream_frames(replay: list[Frame], sub: Subscriber, after: int | None) -> AsyncIterator[dict[str, Any]]:
    """Replay, then live frames; ``session-event`` frames deduplicated by seq (rule 1)."""
    last = after if after is not None else -1
    for frame in replay:
        out = _encode(frame, last)
        if out is not None:
            last = last if frame[2] is None else max(last, frame[2])
            yield out
    while True:
        batch = await sub.next_batch(PING_S)
        if batch is None:
            if sub.overflowed:
                yield {"event": "overflow", "data": json.dumps({"lastSentSeq": last})}
            return
        for frame in batch:
            out = _encode(frame, last)
            if out is not None:
                last = last if frame[2] is None else max(last, frame[2])
                yield out


def _encode(frame: Frame, last: int) -> dict[str, Any] | None:
    name, data, seq = frame
    if seq is not None and seq <= last:
        return None
    out: dict[str, Any] = {"event": name, "data": json.dumps(data, ensure_ascii=False, separators=(",", ":"))}
    if seq is not None:
        out["id"] = str(seq)
    return out


class EventStream(EventSourceResponse):
    """An SSE response that runs ``done`` (unsubscribe, free the slot) however it ends."""

    def __init__(self, source: AsyncIterator[dict[str, Any]], done: Callable[[], None]) -> None:
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        super().__init__(source, ping=PING_S, headers=headers, send_timeout=30)
        self.done = done

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.done()
