"""Closers for an open tail turn: crash repair (``interrupted``) and fork (``forked``) (spec 02 §10.3–10.4).

The same pending-call tracking serves the live loop, which answers a failed step's unanswered
calls before its ``step/end`` (spec 03 §5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydsh.session.events import Event, build_event

Cause = Literal["interrupted", "forked"]

TEXTS: dict[tuple[Cause, bool], str] = {
    ("interrupted", True): (
        "The tool call was interrupted after it was recorded, but no result was durably recorded. "
        "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
        "operation is read-only or idempotent; if it may have side effects, first verify external state "
        "or ask the user. Do not retry blindly."
    ),
    ("interrupted", False): (
        "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
    ),
    ("forked", True): (
        "The history inherited by this branch records this tool call starting but does not include its "
        "result. The parent session may have completed it after the fork point. Decide whether to retry "
        "from the tool semantics: retry only if the operation is read-only or idempotent; if it may have "
        "side effects, first verify external state or ask the user. Do not retry blindly."
    ),
    ("forked", False): (
        "The history inherited by this branch has no record of this tool call starting. The parent "
        "session may have executed it after the fork point. Decide whether to retry from the tool "
        "semantics: retry only if the operation is read-only or idempotent; if it may have side effects, "
        "first verify external state or ask the user. Do not retry blindly."
    ),
}
ERRORS = {
    True: {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"},
    False: {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
}


@dataclass
class PendingCall:
    call_id: str
    turn: int
    step: int
    call_seq: int | None = None


@dataclass
class TailState:
    """Where a log's last turn stands: open turn/step and calls still owed a result."""

    open_turn: int | None = None
    open_step: int | None = None
    pending: dict[str, PendingCall] = field(default_factory=dict)


def tail_state(events: list[Event]) -> TailState:
    """Fold ``events`` into the open tail turn and its unanswered tool calls.

    The fold starts after the last ``turn/end``, which leaves nothing open, so a resume does not
    walk the whole log."""
    state = TailState()
    pending: dict[str, PendingCall] = {}
    for event in events[_after_last_turn_end(events) :]:
        if event.get("ignorable"):
            continue
        etype = event["type"]
        data = event["data"]
        if etype == "turn/start":
            state.open_turn, state.open_step = data["turn"], None
            pending = {}
        elif etype == "turn/end":
            state.open_turn, state.open_step = None, None
            pending = {}
        elif etype == "step/start":
            state.open_step = data["step"]
        elif etype == "step/end":
            state.open_step = None
            pending = {}
        elif etype == "assistant/message":
            for block in data["message"]["content"]:
                if block.get("type") == "tool-call":
                    pending[block["id"]] = PendingCall(block["id"], data["turn"], data["step"])
        elif etype == "tool/call":
            call = pending.get(data["callId"])
            if call is None:
                call = pending[data["callId"]] = PendingCall(data["callId"], data["turn"], data["step"])
            call.call_seq = event["seq"]
        elif etype == "tool/result" and event.get("surfaceOp") == "append":
            pending.pop(data["message"]["toolCallId"], None)
    state.pending = pending
    return state


def _after_last_turn_end(events: list[Event]) -> int:
    """Index just past the last non-ignorable ``turn/end`` (0 when there is none)."""
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event["type"] == "turn/end" and not event.get("ignorable"):
            return index + 1
    return 0


def closer_result(call: PendingCall, cause: Cause, seq: int, time: int) -> Event:
    """One synthetic error ``tool/result`` for an unanswered call."""
    recorded = call.call_seq is not None
    message: dict[str, Any] = {
        "role": "tool",
        "source": {"kind": "tool", "callId": call.call_id},
        "toolCallId": call.call_id,
        "content": [{"type": "text", "text": TEXTS[(cause, recorded)]}],
        "isError": True,
        "id": f"{cause}-tool-result-{call.call_id}-{seq}",
    }
    data = {"turn": call.turn, "step": call.step, "message": message, "error": dict(ERRORS[recorded])}
    sources = [call.call_seq] if call.call_seq is not None else None
    return build_event("tool/result", seq, time, data, source_event_seqs=sources, surface_op="append")


def tail_turn_closers(events: list[Event], cause: Cause = "interrupted") -> list[Event]:
    """Synthetic events closing an open tail turn, in the order of spec 02 §10.3 (empty if balanced)."""
    state = tail_state(events)
    if state.open_turn is None:
        return []
    seq = events[-1]["seq"] + 1
    time = events[-1]["time"]
    closers: list[Event] = []
    for call in state.pending.values():
        closers.append(closer_result(call, cause, seq, time))
        seq += 1
    if state.open_step is not None:
        step = {"turn": state.open_turn, "step": state.open_step}
        closers.append(build_event("step/end", seq, time, step))
        seq += 1
    reason = {"turn": state.open_turn, "reason": {"kind": cause}}
    closers.append(build_event("turn/end", seq, time, reason))
    return closers
