"""Whether and where to export traces, read from the standard ``OTEL_*`` variables (no OpenTelemetry import).

Traces are on when ``OTEL_TRACES_EXPORTER`` names ``otlp`` or ``console``, or, with that variable unset,
when an OTLP endpoint is set; ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` turns them off.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger("pydsh.traces")

DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"
SUPPORTED_PROTOCOL = "http/protobuf"


@dataclass(frozen=True)
class TraceSettings:
    """Traces are exported: by OTLP/HTTP to ``endpoint``, or printed on stdout (``console``)."""

    exporter: Literal["otlp", "console"]
    endpoint: str
    service_name: str | None


def from_environ(env: Mapping[str, str]) -> TraceSettings | None:
    """The settings ``env`` asks for; ``None`` when traces are off (the plugin then stays inert)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporter = chosen_exporter(env)
    if exporter is None:
        return None
    if exporter == "otlp":
        warn_protocol(env)
    return TraceSettings(exporter, traces_endpoint(env), env.get("OTEL_SERVICE_NAME", "").strip() or None)


def chosen_exporter(env: Mapping[str, str]) -> Literal["otlp", "console"] | None:
    """The exporter ``OTEL_TRACES_EXPORTER`` names (``otlp`` first), else ``otlp`` when an endpoint is set."""
    raw = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not raw:
        endpoints = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
        return "otlp" if any(env.get(name, "").strip() for name in endpoints) else None
    names = {name.strip() for name in raw.split(",")}
    for known in ("otlp", "console"):
        if known in names:
            return known
    if names - {"none", ""}:
        log.warning("traces: OTEL_TRACES_EXPORTER=%s names no exporter pydsh has (otlp, console); traces are off", raw)
    return None


def traces_endpoint(env: Mapping[str, str]) -> str:
    """Where OTLP/HTTP spans go, as the exporter resolves it (signal endpoint, else base + ``/v1/traces``)."""
    signal = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if signal:
        return signal
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return f"{base.rstrip('/')}/v1/traces" if base else DEFAULT_ENDPOINT


def warn_protocol(env: Mapping[str, str]) -> None:
    """Say once that a gRPC protocol request is served over HTTP: only the HTTP exporter is in the extra."""
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "").strip()
    if protocol and protocol != SUPPORTED_PROTOCOL:
        log.warning("traces: OTLP protocol %s is not supported; spans are sent as %s", protocol, SUPPORTED_PROTOCOL)
