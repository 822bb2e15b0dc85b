"""What a run yields: live text and reasoning deltas, then the session log's own events as typed views."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Event = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text as it streams (live only; the logged ``AssistantMessage`` follows)."""

    text: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of assistant reasoning as it streams (live only)."""

    text: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One event of the agent's session log; ``event`` is the v4 envelope (type, seq, time, data)."""

    event: Event

    @property
    def type(self) -> str:
        return str(self.event["type"])

    @property
    def seq(self) -> int:
        return int(self.event["seq"])


@dataclass(frozen=True, slots=True)
class AssistantMessage(SessionEvent):
    """A committed assistant message (text, reasoning and tool-call blocks)."""

    @property
    def text(self) -> str:
        return _text(self.event["data"]["message"])

    @property
    def usage(self) -> dict[str, int]:
        return dict(self.event["data"].get("usage") or {})


@dataclass(frozen=True, slots=True)
class ToolCall(SessionEvent):
    """A tool call the model made; ``arguments`` is the JSON text it sent."""

    @property
    def call_id(self) -> str:
        return str(self.event["data"]["callId"])

    @property
    def name(self) -> str:
        return str(self.event["data"]["name"])

    @property
    def arguments(self) -> str:
        return str(self.event["data"]["arguments"])


@dataclass(frozen=True, slots=True)
class ToolResult(SessionEvent):
    """The result of a tool call, as the model will see it."""

    @property
    def call_id(self) -> str:
        return str(self.event["data"]["message"]["toolCallId"])

    @property
    def text(self) -> str:
        return _text(self.event["data"]["message"])

    @property
    def is_error(self) -> bool:
        return bool(self.event["data"]["message"].get("isError"))


@dataclass(frozen=True, slots=True)
class TurnEnd(SessionEvent):
    """The end of a turn: ``finish_reason`` is ``completed``, ``error``, ``aborted``, ``max-tokens``, …"""

    @property
    def finish_reason(self) -> str:
        return str(self.event["data"]["reason"]["kind"])

    @property
    def error(self) -> dict[str, Any] | None:
        """The failure (``message``, ``code``) of an ``error`` turn."""
        error = self.event["data"]["reason"].get("error")
        return dict(error) if error is not None else None


AgentEvent = TextDelta | ReasoningDelta | SessionEvent
"""What :meth:`Agent.prompt` yields; log events are ``SessionEvent`` or one of its subclasses."""

_TYPED: dict[str, type[SessionEvent]] = {
    "assistant/message": AssistantMessage,
    "tool/call": ToolCall,
    "tool/result": ToolResult,
    "turn/end": TurnEnd,
}
DELTAS: dict[str, type[TextDelta | ReasoningDelta]] = {"text-delta": TextDelta, "reasoning-delta": ReasoningDelta}
"""Stream chunk types a run yields as deltas."""


def _text(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message.get("content", ()) if b.get("type") == "text")


def session_event(event: Event) -> SessionEvent:
    """The typed view of one log event."""
    return _TYPED.get(event["type"], SessionEvent)(event)
