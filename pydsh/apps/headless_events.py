"""``pydsh headless --json``: the run as newline-delimited JSON events on stdout, in DeepSeek Harness's shapes.

One compact JSON object per line, for the root session only (subagents show in its tool results):

- ``{"type":"session","sessionId","cwd"}`` once the session is open (new or resumed);
- ``{"type":"status","phase":"turn_start"|"step_start"|"step_end"|"turn_end","turn",…}`` — ``step``
  on step phases, the step's ``usage`` on ``step_end`` when the model reported it, the log's
  ``reason`` on ``turn_end`` (an error turn's carries ``error.code`` and ``error.message``);
- ``{"type":"thinking"|"text","text"}`` per reasoning or text block of an assistant message;
- ``{"type":"tool_call","callId","tool","input"}`` and ``{"type":"tool_result","callId","status","result"}``
  (``status`` ``completed`` or ``error``);
- last, ``{"type":"final","text"}`` plus pydsh's ``finish_reason``, ``session_id`` and summed ``usage``;
  or, when no run happened, ``{"type":"error","code","message"}``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from pydsh.kernel.text import without_lone_surrogates

if TYPE_CHECKING:
    from pydsh.host import RunResult
    from pydsh.session.events import Event
    from pydsh.session.log import Session

STEP_PHASES = {"step/start": "step_start", "step/end": "step_end"}
BLOCK_TYPES = {"reasoning": "thinking", "text": "text"}


def write_line(out: TextIO, obj: dict[str, Any]) -> None:
    """One event as a compact JSON line, flushed so a reader sees it as it happens."""
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    out.write(without_lone_surrogates(line) + "\n")
    out.flush()


def error_line(out: TextIO, code: str, message: str) -> None:
    """The one ``error`` event of a run that failed before or instead of a turn."""
    write_line(out, {"type": "error", "code": code, "message": message})


class EventStream:
    """The root session's log events as they are committed, mapped to the event lines above."""

    def __init__(self, out: TextIO, root_id: str) -> None:
        self.out = out
        self.root_id = root_id
        self._usage: dict[tuple[Any, Any], Any] = {}

    def session(self, session: Session) -> None:
        write_line(self.out, {"type": "session", "sessionId": session.id, "cwd": session.header.get("cwd")})

    def event(self, session: Session, event: Event) -> None:
        """The ``session/event`` listener: map one committed event of the root session."""
        if session.id != self.root_id:
            return
        etype = event["type"]
        data = event["data"]
        if etype == "turn/start":
            write_line(self.out, {"type": "status", "phase": "turn_start", "turn": data["turn"]})
        elif etype in STEP_PHASES:
            self._step(STEP_PHASES[etype], data)
        elif etype == "assistant/message":
            self._assistant(data)
        elif etype == "tool/call":
            self._tool_call(data)
        elif etype == "tool/result" and event.get("surfaceOp") == "append":
            self._tool_result(data["message"])
        elif etype == "turn/end":
            line = {"type": "status", "phase": "turn_end", "turn": data["turn"], "reason": data["reason"]}
            write_line(self.out, line)

    def _step(self, phase: str, data: dict[str, Any]) -> None:
        line = {"type": "status", "phase": phase, "turn": data["turn"], "step": data["step"]}
        usage = self._usage.pop((data["turn"], data["step"]), None) if phase == "step_end" else None
        if usage:
            line["usage"] = usage
        write_line(self.out, line)

    def _assistant(self, data: dict[str, Any]) -> None:
        if data.get("usage"):
            self._usage[(data.get("turn"), data.get("step"))] = data["usage"]
        for block in data["message"]["content"]:
            kind = BLOCK_TYPES.get(block["type"])
            if kind is not None and block.get("text"):
                write_line(self.out, {"type": kind, "text": block["text"]})

    def _tool_call(self, data: dict[str, Any]) -> None:
        try:
            arguments = json.loads(data["arguments"])
        except ValueError:
            arguments = data["arguments"]
        write_line(self.out, {"type": "tool_call", "callId": data["callId"], "tool": data["name"], "input": arguments})

    def _tool_result(self, message: dict[str, Any]) -> None:
        text = "".join(block.get("text", "") for block in message["content"])
        status = "error" if message.get("isError") else "completed"
        write_line(self.out, {"type": "tool_result", "callId": message["toolCallId"], "status": status, "result": text})

    def final(self, result: RunResult, finish_reason: str) -> None:
        """The closing line: dsh's ``text``, and the fields pydsh's single JSON result had."""
        write_line(
            self.out,
            {
                "type": "final",
                "text": result.final_response,
                "finish_reason": finish_reason,
                "session_id": result.session_id,
                "usage": result.usage,
            },
        )
