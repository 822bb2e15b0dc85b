"""Plugin ``traces``: OpenTelemetry spans of every session, exported when the ``OTEL_*`` variables ask for it.

Unconfigured, ``apply`` returns at once and nothing of OpenTelemetry is imported. Configured without the
``pydsh[otel]`` extra, it warns once and stays inert. Configured, it follows the session log
(``session/event``), model requests (``llm/stream``) and tool bodies (``tools/execute``); unloading ends
the spans still open and flushes the exporter.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydsh.contract.tools import TOOL_EXECUTE, ToolExec, ToolOutcome
from pydsh.kernel.context import Context
from pydsh.llm.hooks import LLM_STREAM
from pydsh.session.hooks import SESSION_CREATED, SESSION_DISPOSED, SESSION_EVENT
from pydsh.traces.settings import TraceSettings, from_environ

if TYPE_CHECKING:
    from pydsh.session.events import Event
    from pydsh.session.log import Session
    from pydsh.traces.export import Pipeline
    from pydsh.traces.spans import SpanBook

log = logging.getLogger("pydsh.traces")

name = "traces"
EXTRA_HINT = "pip install 'pydsh[otel]'"


def apply(ctx: Context, config: None) -> None:
    """Trace every session when ``OTEL_*`` configure an exporter; otherwise do nothing."""
    settings = from_environ(os.environ)
    if settings is None:
        return
    pipeline = open_pipeline(settings)
    if pipeline is None:
        return
    from pydsh.traces.spans import SpanBook

    book = SpanBook(pipeline.tracer)
    ctx.register(lambda: asyncio.to_thread(close, book, pipeline))
    listen(ctx, book)


def open_pipeline(settings: TraceSettings) -> Pipeline | None:
    """The span pipeline, or ``None`` (with one warning) when the ``otel`` extra is not installed."""
    try:
        from pydsh.traces.export import Pipeline
    except ImportError as exc:
        log.warning("traces: OTEL_* ask for traces but OpenTelemetry is not installed (%s): %s", exc.name, EXTRA_HINT)
        return None
    from importlib.metadata import version

    return Pipeline(settings, version("pydsh"))


def close(book: SpanBook, pipeline: Pipeline) -> None:
    """End what is still open as interrupted, then flush and stop the exporter."""
    book.close_every()
    pipeline.close()


def listen(ctx: Context, book: SpanBook) -> None:
    """Follow session logs, model requests and tool bodies."""

    def observe(session: Session, event: Event) -> None:
        book.observe(session.id, session.header, event)

    async def model_call(options: dict[str, Any], nxt: Callable[[], Awaitable[Any]]) -> Any:
        session_id = str(options.get("sessionId") or "")
        if options.get("loop_built"):
            book.model_call(session_id, options)
        try:
            return await nxt()
        except BaseException as exc:
            book.model_failed(session_id, exc)
            raise

    async def tool_body(call: ToolExec, nxt: Callable[[], Awaitable[ToolOutcome]]) -> ToolOutcome:
        from pydsh.traces.spans import CALLING_TOOL

        span = book.tool_span(call.session.id, call.call_id) if call.session is not None else None
        token = CALLING_TOOL.set(span)
        try:
            return await nxt()
        finally:
            CALLING_TOOL.reset(token)

    ctx.on(SESSION_CREATED, lambda session: book.created(session.id))
    ctx.on(SESSION_EVENT, observe)
    ctx.on(SESSION_DISPOSED, lambda session: book.close(session.id))
    ctx.on(LLM_STREAM, model_call, before=("stream-pacing",))
    ctx.on(TOOL_EXECUTE, tool_body)
