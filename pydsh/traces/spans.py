"""Spans from the session log as it is written: turn → step → model call / tool call (GenAI conventions).

Each committed event opens or ends a span, so a span ends on every path the log records (a turn
completed, aborted or failed); what is still open when a session leaves or the plugin unloads is
ended as interrupted. Model calls open when the request leaves (``llm/stream``) and end with the
attempt's ``assistant/message`` or ``assistant/attempt``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from time import time_ns
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

Attributes = dict[str, Any]

CALLING_TOOL: contextvars.ContextVar[Span | None] = contextvars.ContextVar("pydsh_traces_tool", default=None)
"""The tool call span whose body is running in this task: a session created there is its subagent."""

INTERRUPTED = "interrupted"


@dataclass
class Open:
    """The spans open in one session, and the tool call span its turns hang under (subagents)."""

    parent: Span | None = None
    turn: Span | None = None
    step: Span | None = None
    ended_step: tuple[Span, int] | None = None
    """The last step's span and the time its ``step/end`` was logged: ended once the turn goes on or ends."""
    model: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)


class SpanBook:
    """Opens and ends spans for every session's log events."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.sessions: dict[str, Open] = {}

    def created(self, session_id: str) -> None:
        """A session created inside a tool call's body (a subagent) runs its turns under that call's span."""
        parent = CALLING_TOOL.get()
        if parent is not None:
            self.sessions.setdefault(session_id, Open()).parent = parent

    def observe(self, session_id: str, header: Mapping[str, Any], event: Mapping[str, Any]) -> None:
        """Open or end the span ``event`` starts or settles."""
        handler = HANDLERS.get(event["type"])
        if handler is not None:
            handler(self, session_id, header, event["data"])

    def tool_span(self, session_id: str, call_id: str) -> Span | None:
        """The open span of a tool call, if any."""
        state = self.sessions.get(session_id)
        return state.tools.get(call_id) if state is not None else None

    def model_call(self, session_id: str, options: Mapping[str, Any]) -> None:
        """A step's model request is leaving: open its ``chat`` span under the step."""
        state = self.sessions.get(session_id)
        if state is None or state.step is None:
            return
        end(state.model, INTERRUPTED)
        model = str(options.get("model") or "")
        attributes = base(session_id) | request_attributes(options)
        state.model = self._start(f"chat {model}".strip(), state.step, attributes, SpanKind.CLIENT)

    def model_failed(self, session_id: str, error: BaseException) -> None:
        """The model request failed before streaming: end its span with the error."""
        state = self.sessions.get(session_id)
        if state is not None and state.model is not None:
            state.model.set_attribute("error.type", type(error).__name__)
            end(state.model, str(error) or type(error).__name__)
            state.model = None

    def close(self, session_id: str) -> None:
        """The session left: end whatever it still has open as interrupted."""
        state = self.sessions.pop(session_id, None)
        if state is not None:
            end_all(state)

    def close_every(self) -> None:
        """The plugin unloads: end every open span as interrupted."""
        for session_id in list(self.sessions):
            self.close(session_id)

    def _start(self, name: str, parent: Span | None, attributes: Attributes, kind: SpanKind) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes)

    # -- log events --------------------------------------------------------------------------------

    def turn_start(self, session_id: str, header: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        state = self.sessions.setdefault(session_id, Open())
        end_all(state)
        agent = str(header.get("agentPreset") or "pydsh")
        attributes = base(session_id) | {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        attributes["pydsh.turn"] = data["turn"]
        state.turn = self._start(f"invoke_agent {agent}", state.parent, attributes, SpanKind.INTERNAL)

    def turn_end(self, session_id: str, header: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        state = self.sessions.get(session_id)
        if state is None or state.turn is None:
            return
        reason = data.get("reason") or {}
        kind = str(reason.get("kind") or "completed")
        failure = turn_failure(reason)
        turn, state.turn = state.turn, None
        end_step(state, failure[1] if failure is not None else None)
        end_children(state, failure[1] if failure is not None else INTERRUPTED)
        turn.set_attribute("pydsh.turn.finish_reason", kind)
        if failure is not None:
            turn.set_attribute("error.type", failure[0])
        end(turn, failure[1] if failure is not None else None)

    def step_start(self, session_id: str, header: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        state = self.sessions.get(session_id)
        if state is None or state.turn is None:
            return
        end(state.step, INTERRUPTED)
        end_step(state, None)
        attributes = base(session_id) | {"pydsh.turn": data["turn"], "pydsh.step": data["step"]}
        state.step = self._start(f"step {data['step']}", state.turn, attributes, SpanKind.INTERNAL)

    def step_end(self, session_id: str, header: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        state = self.sessions.get(session_id)
        if state is not None and state.step is not None:
            end(state.model, INTERRUPTED)
            state.ended_step = (state.step, time_ns())
            state.model = state.step = None

    def assistant_message(self, session_id: str, header: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        state = self.sessions.get(session_id)
        if state is None or state.model is None:
            return
        span, state.model = state.model, None
        span.set_attributes(response_attributes(data))
        end(span, INTERRUPTED if data.get("interrupted") else None)

    def assistant_attempt(self, session_id: str, header: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        state = self.sessions.get(session_id)
        if state is None or state.model is None:
            return
        span, state.model = state.model, None
        failure = stream_finish(data).get("failure") or {}
        span.set_attribute("error.type", str(failure.get("code") or "UNKNOWN"))
        end(span, str(failure.get("message") or "the model call did not finish"))

    def tool_call(self, session_id: str, header: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        state = self.sessions.get(session_id)
        if state is None or state.step is None:
            return
        name, call_id = str(data["name"]), str(data["callId"])
        attributes = base(session_id) | {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        attributes["gen_ai.tool.call.id"] = call_id
        state.tools[call_id] = self._start(f"execute_tool {name}", state.step, attributes, SpanKind.INTERNAL)

    def tool_result(self, session_id: str, header: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        state = self.sessions.get(session_id)
        message = data.get("message") or {}
        span = state.tools.pop(str(message.get("toolCallId")), None) if state is not None else None
        if span is None:
            return
        if message.get("isError"):
            span.set_attribute("error.type", "tool_error")
        end(span, "the tool returned an error" if message.get("isError") else None)


HANDLERS = {
    "turn/start": SpanBook.turn_start,
    "turn/end": SpanBook.turn_end,
    "step/start": SpanBook.step_start,
    "step/end": SpanBook.step_end,
    "assistant/message": SpanBook.assistant_message,
    "assistant/attempt": SpanBook.assistant_attempt,
    "tool/call": SpanBook.tool_call,
    "tool/result": SpanBook.tool_result,
}


def base(session_id: str) -> Attributes:
    """What every span of a session carries: the session as the GenAI conversation."""
    return {"gen_ai.conversation.id": session_id}


def request_attributes(options: Mapping[str, Any]) -> Attributes:
    """The route and request settings of a model call."""
    provider = str(options.get("provider") or "")
    attributes: Attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider}
    attributes["gen_ai.system"] = provider
    for key, name in (("model", "gen_ai.request.model"), ("maxTokens", "gen_ai.request.max_tokens")):
        if options.get(key) is not None:
            attributes[name] = options[key]
    if options.get("temperature") is not None:
        attributes["gen_ai.request.temperature"] = float(options["temperature"])
    return attributes


def response_attributes(data: Mapping[str, Any]) -> Attributes:
    """Response model, token usage and finish reason of a committed ``assistant/message``."""
    source = (data.get("message") or {}).get("source") or {}
    response = (source.get("replayState") or {}).get("response") or {}
    attributes: Attributes = {"gen_ai.response.model": str(response.get("model") or source.get("model") or "")}
    usage = data.get("usage") or {}
    for key, name in (("inputTokens", "gen_ai.usage.input_tokens"), ("outputTokens", "gen_ai.usage.output_tokens")):
        if usage.get(key) is not None:
            attributes[name] = int(usage[key])
    if usage.get("cacheReadTokens") is not None:
        attributes["gen_ai.usage.cache_read.input_tokens"] = int(usage["cacheReadTokens"])
    finish = stream_finish(data).get("kind")
    if finish:
        attributes["gen_ai.response.finish_reasons"] = [str(finish)]
    return attributes


def stream_finish(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The finish reason the provider streamed (``{"kind": ...}``), empty when it sent none."""
    for record in reversed(data.get("stream") or ()):
        chunk = record.get("chunk") if record.get("type") == "chunk" else None
        if chunk is not None and chunk.get("type") == "finish":
            return chunk.get("reason") or {}
    return {}


def turn_failure(reason: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(error.type, description)`` of a turn that did not end well (aborted or failed), else ``None``."""
    kind = reason.get("kind")
    if kind == "aborted":
        return "aborted", "the turn was aborted"
    if kind == "error":
        error = reason.get("error") or {}
        return str(error.get("code") or "UNKNOWN"), str(error.get("message") or "the turn failed")
    return None


def end(span: Span | None, error: str | None) -> None:
    """End ``span`` (if any), with an error status when ``error`` says why it did not succeed."""
    if span is None:
        return
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error))
    span.end()


def end_step(state: Open, error: str | None) -> None:
    """End the last ended step's span at its ``step/end`` time: with the turn's error if it was its last."""
    if state.ended_step is None:
        return
    span, ended = state.ended_step
    state.ended_step = None
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error))
    span.end(end_time=ended)


def end_children(state: Open, error: str) -> None:
    """End a session's open tool, model and step spans: still open when their turn ends, they did not finish."""
    for span in state.tools.values():
        end(span, error)
    state.tools.clear()
    end(state.model, error)
    end(state.step, error)
    state.model = state.step = None


def end_all(state: Open) -> None:
    """End every span a session has open, its turn's included, as interrupted."""
    end_step(state, INTERRUPTED)
    end_children(state, INTERRUPTED)
    end(state.turn, INTERRUPTED)
    state.turn = None
