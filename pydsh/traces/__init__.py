"""OpenTelemetry traces of turns, steps, model calls and tool calls, exported over OTLP (issue 27 item 6).

The ``traces`` plugin reads the standard ``OTEL_*`` variables; unset, it imports nothing and does nothing.
"""
