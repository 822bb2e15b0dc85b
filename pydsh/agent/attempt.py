"""Streaming one provider attempt and settling it durably (spec 03 §7.3).

Chunks are timestamped with the session clock, folded into the compact stream records and the
assembled message, and mirrored live as ``agent/assistant-stream`` frames. The attempt settles
as exactly one ``assistant/message`` (success, or an interrupted prefix with visible text) or
one ``assistant/attempt`` (failure, or an abort with nothing visible).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import ASSISTANT_STREAM, AssistantStream
from pydsh.kernel.cancel import AbortError, AbortSignal
from pydsh.llm.stream_records import AssistantStreamAccumulator, BlockAssembler
from pydsh.session.log import now_ms

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from pydsh.agent.loop import LoopAgent


@dataclass
class AttemptResult:
    """A settled attempt: the committed event and, on failure, the provider failure."""

    event: dict[str, Any]
    finish: dict[str, Any]
    failure: dict[str, Any] | None = None


class Attempt:
    """One streamed provider call of one step."""

    def __init__(self, agent: LoopAgent, turn: int, step: int, number: int) -> None:
        self.agent = agent
        self.turn = turn
        self.step = step
        self.attempt_id = f"{agent.session.id}:{number}"
        self.revision = 0
        self.records = AssistantStreamAccumulator()
        self.blocks = BlockAssembler()

    def _frame(self, kind: str, **extra: Any) -> None:
        self.revision += 1
        frame = {
            "type": kind,
            "attemptId": self.attempt_id,
            "revision": self.revision,
            "turn": self.turn,
            "step": self.step,
            **extra,
        }
        self.agent.ctx.emit(ASSISTANT_STREAM, AssistantStream(agent=self.agent, frame=frame), scope=self.agent)

    async def run(
        self, stream: AsyncIterator[dict[str, Any]], signal: AbortSignal, route: dict[str, Any]
    ) -> AttemptResult:
        """Consume ``stream`` and commit the attempt; an abort commits what is visible, then raises."""
        session = self.agent.session
        self._frame("start", startedAfterSeq=session.seq)
        try:
            async with signal.scope():
                async for chunk in stream:
                    time = max(now_ms(), session.last_time)
                    self.records.add(chunk, time)
                    self.blocks.add(chunk)
                    self._frame("chunk", index=chunk.get("index"), time=time, chunk=chunk)
        except (AbortError, asyncio.CancelledError):
            self._settle_interrupted(route)
            raise
        except BaseException:
            self._commit_attempt()
            raise
        if signal.aborted:
            self._settle_interrupted(route)
            raise AbortError(signal.reason)
        finish = self.blocks.finish
        if finish.get("kind") in ("error", "aborted"):
            event = self._commit_attempt()
            return AttemptResult(
                event, finish, finish.get("failure") or {"message": "model call failed", "code": "UNKNOWN"}
            )
        return AttemptResult(self._commit_message(self.blocks.content(), route), finish)

    def _message(self, content: list[dict[str, Any]], route: dict[str, Any]) -> dict[str, Any]:
        source: dict[str, Any] = {"kind": "model", "provider": route["provider"], "model": route["model"]}
        replay = self.blocks.replay_state
        if replay is not None:
            source["replayState"] = replay
        return {"role": "assistant", "content": content, "source": source, "id": str(uuid.uuid4())}

    def _commit_message(
        self, content: list[dict[str, Any]], route: dict[str, Any], *, interrupted: bool = False
    ) -> dict[str, Any]:
        data: dict[str, Any] = {"turn": self.turn, "step": self.step, "message": self._message(content, route)}
        if self.blocks.usage is not None:
            data["usage"] = self.blocks.usage
        data["stream"] = self.records.records()
        if interrupted:
            data["interrupted"] = True
        event = self.agent.session.append("assistant/message", data, surface_op="append")
        self._frame("end", outcome={"kind": "committed", "eventType": "assistant/message", "seq": event["seq"]})
        return event

    def _commit_attempt(self) -> dict[str, Any]:
        data = {"turn": self.turn, "step": self.step, "stream": self.records.records()}
        event = self.agent.session.append("assistant/attempt", data)
        self._frame("end", outcome={"kind": "committed", "eventType": "assistant/attempt", "seq": event["seq"]})
        return event

    def _settle_interrupted(self, route: dict[str, Any]) -> None:
        """Keep the visible prefix of an aborted attempt (text and reasoning, no tool calls)."""
        if self.agent.session.open_step is None:
            self._frame("end", outcome={"kind": "abandoned"})
            return
        visible = self.blocks.interrupted_blocks()
        if visible:
            self._commit_message(visible, route, interrupted=True)
        else:
            self._commit_attempt()
