"""Tool-call scheduling of one step: exclusive barriers, a rolling parallel pool, model-ordered commits (spec 03 §8).

Calls start in model order (``tool/call`` logged, then the pipeline's prepare), run as tasks,
and commit strictly in model order (``tool/result`` citing its call). An abort stops starting
calls, drains the started ones, and answers every unstarted call with a synthetic pair.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydsh.contract.tools import (
    TOOLS,
    ExecutionMode,
    ToolExec,
    ToolInvocation,
    ToolOutcome,
    aborted_before_dispatch,
    unknown_tool,
)

if TYPE_CHECKING:
    from pydsh.agent.loop import LoopAgent
    from pydsh.kernel.cancel import AbortSignal


def parse_arguments(raw: str) -> Any:
    """``""`` → ``{}``; invalid JSON passes through as the raw string (validation then reports it)."""
    if raw == "":
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@dataclass
class Call:
    """One tool call of the step and its progress."""

    call_id: str
    name: str
    arguments: str
    exec: ToolExec | None = None
    invocation: ToolInvocation | None = None
    call_seq: int | None = None
    task: asyncio.Task[None] | None = None
    committed: bool = False

    @property
    def ready(self) -> bool:
        return self.task is None or self.task.done()


class ToolCallScheduler:
    """Runs the tool calls of one assistant message; returns whether a result concluded the turn."""

    def __init__(self, agent: LoopAgent, turn: int, step: int, signal: AbortSignal) -> None:
        self.agent = agent
        self.turn = turn
        self.step = step
        self.signal = signal
        self.tools = agent.ctx.get(TOOLS)
        self.concluded = False
        self.limit = max(1, agent.loop.config.maxParallelToolCalls)

    async def run(self, blocks: list[dict[str, Any]]) -> bool:
        calls = [Call(b["id"], b["name"], b["arguments"]) for b in blocks]
        started: list[Call] = []
        try:
            index = 0
            while index < len(calls) and not self.signal.aborted:
                call = calls[index]
                if self._mode(call) == "exclusive":
                    await self._start(call)
                    started.append(call)
                    await self._drain(started)
                    index += 1
                    continue
                index = await self._pool(calls, index, started)
        except BaseException:
            await self._settle(started)
            raise
        await self._drain(started)
        for call in calls:
            if call.call_seq is None:
                self._aborted_pair(call)
        return self.concluded

    # -- pool ---------------------------------------------------------------------------------

    async def _pool(self, calls: list[Call], index: int, started: list[Call]) -> int:
        """Run consecutive parallel calls from ``index`` with at most ``limit`` in flight."""
        pool: list[Call] = []
        while not self.signal.aborted:
            while index < len(calls) and len(self._in_flight(pool)) < self.limit and not self.signal.aborted:
                call = calls[index]
                if self._mode(call) != "parallel":
                    await self._drain(started)
                    return index
                await self._start(call)
                started.append(call)
                pool.append(call)
                index += 1
                await self._commit_ready(started)
            flying = [c.task for c in self._in_flight(pool) if c.task is not None]
            if not flying:
                break
            await asyncio.wait(flying, return_when=asyncio.FIRST_COMPLETED)
            await self._commit_ready(started)
            if index >= len(calls) and not self._in_flight(pool):
                break
        await self._drain(started)
        return index

    @staticmethod
    def _in_flight(pool: list[Call]) -> list[Call]:
        return [c for c in pool if c.task is not None and not c.task.done()]

    def _mode(self, call: Call) -> ExecutionMode:
        if self.tools is None:
            return "exclusive"
        try:
            return self.tools.execution_mode(self._exec(call))
        except Exception:
            return "exclusive"

    # -- one call -----------------------------------------------------------------------------

    def _exec(self, call: Call) -> ToolExec:
        """The call as the tools see it (made once per call)."""
        if call.exec is None:
            call.exec = ToolExec(
                call_id=call.call_id,
                name=call.name,
                raw_arguments=call.arguments,
                arguments=parse_arguments(call.arguments),
                agent=self.agent,
                session=self.agent.session,
                turn=self.turn,
                step=self.step,
                signal=self.signal,
                scope=self.agent,
            )
        return call.exec

    def _log_call(self, call: Call) -> None:
        data = {"turn": self.turn, "step": self.step, "callId": call.call_id, "name": call.name}
        data["arguments"] = call.arguments
        call.call_seq = self.agent.session.append("tool/call", data)["seq"]

    async def _start(self, call: Call) -> None:
        self._log_call(call)
        if self.tools is None:
            return
        call.invocation = self.tools.invocation(self._exec(call))
        await call.invocation.prepare()
        call.task = asyncio.get_running_loop().create_task(call.invocation.execute())

    async def _commit_ready(self, started: list[Call]) -> None:
        """Commit finished calls in model order, stopping at the first one still running."""
        for call in started:
            if call.committed:
                continue
            if not call.ready:
                return
            await self._commit(call)

    async def _drain(self, started: list[Call]) -> None:
        """Await started calls and commit them in model order."""
        for call in started:
            if call.committed:
                continue
            if call.task is not None:
                await asyncio.wait([call.task])
            await self._commit(call)

    async def _settle(self, started: list[Call]) -> None:
        for call in started:
            if call.task is not None and not call.task.done():
                await asyncio.wait([call.task])

    async def _commit(self, call: Call) -> None:
        outcome = await self._outcome(call)
        call.committed = True
        self._log_result(call, outcome)
        for message in outcome.additional_contexts:
            self.agent.inject(message)
        if outcome.concludes_turn:
            self.concluded = True

    async def _outcome(self, call: Call) -> ToolOutcome:
        if self.tools is None or call.invocation is None:
            return unknown_tool(call.name)
        return await call.invocation.commit()

    def _log_result(self, call: Call, outcome: ToolOutcome) -> None:
        message = {
            "role": "tool",
            "source": {"kind": "tool", "callId": call.call_id},
            "toolCallId": call.call_id,
            "content": outcome.content,
            "isError": bool(outcome.is_error or outcome.error),
            "id": str(uuid.uuid4()),
        }
        data: dict[str, Any] = {"turn": self.turn, "step": self.step, "message": message}
        if outcome.error:
            data["error"] = outcome.error
        if outcome.meta is not None:
            data["meta"] = outcome.meta
        sources = [call.call_seq] if call.call_seq is not None else None
        self.agent.session.append("tool/result", data, surface_op="append", source_event_seqs=sources)

    def _aborted_pair(self, call: Call) -> None:
        self._log_call(call)
        self._log_result(call, aborted_before_dispatch())
