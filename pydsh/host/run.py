"""One prompt as it runs: a durable receipt, its events as an async iterator, and its result."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import ASSISTANT_STREAM, AssistantStream
from pydsh.host.events import DELTAS, AgentEvent, Event, session_event
from pydsh.session.hooks import SESSION_EVENT
from pydsh.session.outcome import read_outcome

if TYPE_CHECKING:
    from pydsh.host.agent import Agent, Input


@dataclass(frozen=True)
class Receipt:
    """A prompt the log holds on disk: its message id, the seq of the splice that queued it, and whether
    the agent was busy (so it waits as a later turn or step)."""

    message_id: str
    seq: int
    queued: bool

    @property
    def accepted_at_seq(self) -> int:
        """The last seq before the prompt (a stream opened after it sees the prompt's events)."""
        return self.seq - 1


@dataclass(frozen=True)
class RunResult:
    """What one prompt produced, once the agent is idle again (the reading of ``pydsh.session.outcome``)."""

    session_id: str
    final_response: str
    finish_reason: str | None
    usage: dict[str, int]
    error: dict[str, Any] | None
    events: list[Event] = field(repr=False)


def run_result(session_id: str, events: list[Event]) -> RunResult:
    """The result of a run whose events (its receipt first) are ``events``."""
    outcome = read_outcome(events)
    return RunResult(
        session_id=session_id,
        final_response=outcome.final_response,
        finish_reason=outcome.finish_reason,
        usage=outcome.usage,
        error=outcome.error,
        events=events,
    )


class Run:
    """One prompt as an async iterator of its events; ``result`` is set after the last one.

    Use it as ``async with agent.prompt(...) as run:`` when you may stop iterating early: leaving
    the block stops collecting (the turn goes on; ``Agent.cancel`` stops it).
    """

    def __init__(self, agent: Agent, input: Input) -> None:
        self.agent = agent
        self.input = input
        self.result: RunResult | None = None
        self._events: AsyncGenerator[AgentEvent, None] | None = None

    def __aiter__(self) -> Run:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._events is None:
            self._events = self._stream()
        return await anext(self._events)

    async def __aenter__(self) -> Run:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop collecting (listeners removed at once)."""
        if self._events is not None:
            await self._events.aclose()

    async def _stream(self) -> AsyncGenerator[AgentEvent, None]:
        live = self.agent.live
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        logged: list[Event] = []
        message_id = str(uuid.uuid4())

        def on_event(session: Any, event: Event) -> None:
            if session is not live.session:
                return
            if not logged and not _is_receipt(event, message_id):
                return
            logged.append(event)
            queue.put_nowait(session_event(event))

        def on_stream(payload: AssistantStream) -> None:
            frame = payload["frame"]
            if payload["agent"] is live and logged and frame["type"] == "chunk":
                kind = DELTAS.get(frame["chunk"]["type"])
                if kind is not None:
                    queue.put_nowait(kind(frame["chunk"]["text"], frame["turn"], frame["step"]))

        ctx = self.agent.host.ctx
        removers = [ctx.on(SESSION_EVENT, on_event), ctx.on(ASSISTANT_STREAM, on_stream)]
        idle: asyncio.Future[None] | None = None
        try:
            await self.agent.submit(self.input, message_id=message_id)
            idle = asyncio.ensure_future(live.when_idle())
            idle.add_done_callback(lambda _done: queue.put_nowait(None))
            while (item := await queue.get()) is not None:
                yield item
            await idle
        finally:
            for remove in removers:
                remove()
            if idle is not None and not idle.done():
                idle.cancel()
        self.result = run_result(live.id, logged)


def _is_receipt(event: Event, message_id: str) -> bool:
    """The splice that queued ``message_id`` (where a run starts collecting)."""
    if event["type"] != "agent/inbox/spliced":
        return False
    return any(m.get("id") == message_id for m in event["data"].get("inserted", ()))
