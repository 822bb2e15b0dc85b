"""The span pipeline: a tracer provider of its own, a batch processor and the exporter ``OTEL_*`` chose.

pydsh never installs a global tracer provider (an embedding program may have its own). A failing
exporter is reported by one warning naming the endpoint and the reason; the OTLP exporter's own log
lines are kept out of the way meanwhile. Closing flushes what was ended, without waiting on an endpoint
already known to be unreachable.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter, SpanExportResult

from pydsh.traces.settings import TraceSettings

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

log = logging.getLogger("pydsh.traces")

OTLP_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
"""The logger the OTLP/HTTP span exporter reports each failed or retried export on."""


class FirstMessage(logging.Handler):
    """Keeps the first message logged to it since :meth:`clear`: the reason the OTLP exporter gave first."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.text = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.text = self.text or record.getMessage()

    def clear(self) -> None:
        self.text = ""


class ReportingExporter(SpanExporter):
    """Wraps an exporter: its first failure is one warning; once failed, a closing pipeline drops spans."""

    def __init__(self, inner: SpanExporter, endpoint: str, reasons: FirstMessage) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.reasons = reasons
        self.failed = False
        self.warned = False
        self.closing = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export through the inner exporter; never raises."""
        if self.closing and self.failed:
            return SpanExportResult.FAILURE
        self.reasons.clear()
        try:
            result = self.inner.export(spans)
        except Exception as exc:
            self.reasons.text = f"{type(exc).__name__}: {exc}"
            result = SpanExportResult.FAILURE
        self.failed = result is not SpanExportResult.SUCCESS
        if self.failed and not self.warned:
            self.warned = True
            reason = self.reasons.text or "the export failed"
            log.warning(
                "traces: spans could not be exported to %s (%s); runs go on without them", self.endpoint, reason
            )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class Pipeline:
    """A tracer whose spans are batched to the configured exporter until :meth:`close`."""

    def __init__(self, settings: TraceSettings, version: str) -> None:
        self.reasons = FirstMessage()
        self.otlp_logger = logging.getLogger(OTLP_LOGGER)
        self.exporter = ReportingExporter(inner_exporter(settings), settings.endpoint, self.reasons)
        self.provider = TracerProvider(resource=resource(settings, version))
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter))
        self.tracer: Tracer = self.provider.get_tracer("pydsh", version)
        self.otlp_logger.addHandler(self.reasons)
        self.otlp_logger.propagate = False

    def close(self) -> None:
        """Export every ended span and stop (blocking: call it off the event loop)."""
        self.exporter.closing = True
        try:
            self.provider.shutdown()
        finally:
            self.otlp_logger.removeHandler(self.reasons)
            self.otlp_logger.propagate = True


def inner_exporter(settings: TraceSettings) -> SpanExporter:
    """The OTLP/HTTP exporter (configured by its own ``OTEL_EXPORTER_OTLP_*`` variables), or the console one."""
    if settings.exporter == "console":
        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def resource(settings: TraceSettings, version: str) -> Resource:
    """``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` as the SDK reads them; ``pydsh`` by default."""
    attributes: dict[str, str] = {"service.version": version}
    if settings.service_name is None:
        attributes["service.name"] = "pydsh"
    return Resource.create(attributes)
