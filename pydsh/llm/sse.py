"""Server-sent-event framing over httpx-sse, shared by both adapters (spec 04 §4.6).

httpx-sse applies the WHATWG rules (line splitting, dispatch on the blank line only, comments,
joined ``data:`` lines). The response's content type is never checked: it is forced to
``text/event-stream`` before wrapping because httpx-sse refuses anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydsh.kernel.cancel import AbortSignal
from pydsh.llm.http import transport_error
from pydsh.llm.types import LlmError

if TYPE_CHECKING:
    import httpx

DRAIN_S = 0.05
"""How long a finished stream may take to end its body before its connection is given up (closed)."""


async def sse_events(response: httpx.Response, signal: AbortSignal, prefix: str) -> AsyncIterator[tuple[str, str]]:
    """``(event name or "", data)`` of each dispatched event; abort, idle timeout and resets raise ``LlmError``.

    One abort registration serves the whole stream: it cancels the task only while it waits for
    the next event here, so the consumer's own awaits between events are never interrupted.
    """
    import httpx
    import httpx_sse

    response.headers["content-type"] = "text/event-stream"
    source = httpx_sse.EventSource(response).aiter_sse()
    task = asyncio.current_task()
    waiting = fired = False

    def on_abort(_reason: object) -> None:
        nonlocal fired
        if waiting and task is not None:
            fired = True
            task.cancel()

    remove = signal.add_callback(on_abort)
    try:
        while True:
            if signal.aborted:
                raise LlmError(f"{prefix} request aborted", "ABORTED")
            waiting = True
            try:
                event = await anext(source)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if not fired or task is None:
                    raise
                task.uncancel()
                raise LlmError(f"{prefix} request aborted", "ABORTED") from None
            except httpx.HTTPError as exc:
                raise transport_error(exc, prefix) from exc
            finally:
                waiting = False
            name = event.event
            yield ("" if name == "message" else name), event.data
    finally:
        remove()
        await source.aclose()


async def drain(events: AsyncIterator[tuple[str, str]]) -> None:
    """Read a finished stream to the end of its body, so its connection goes back to the pool: otherwise every
    model call opens a new one (a TCP and, over HTTPS, a TLS handshake). Events after the end are ignored; a
    server that does not end the body within ``DRAIN_S`` only loses the connection."""
    with contextlib.suppress(TimeoutError, LlmError):
        async with asyncio.timeout(DRAIN_S):
            async for _event in events:
                pass


def typed_event(name: str, data: str, prefix: str) -> dict[str, Any]:
    """A Messages event's JSON object with a string ``type`` matching its ``event:`` name."""
    try:
        doc = json.loads(data)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("type"), str):
        raise LlmError(f"{prefix} SSE contains invalid JSON", "MALFORMED_RESPONSE")
    if name and name != doc["type"]:
        raise LlmError(f"{prefix} SSE event type mismatch", "MALFORMED_RESPONSE")
    return doc
