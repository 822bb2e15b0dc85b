"""One root session a host opened: prompt it durably, steer, cancel, settle, read its result, close it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from pydsh.host.errors import HostError
from pydsh.subagents.keys import SUBAGENTS

if TYPE_CHECKING:
    from pydsh.agent.loop import LoopAgent
    from pydsh.agent.registry import AgentHandle
    from pydsh.host.events import Event
    from pydsh.host.host import Host
    from pydsh.host.run import Receipt, Run, RunResult
    from pydsh.session.log import Session

Input = str | list[dict[str, Any]]
"""A prompt: text, or content blocks (``{"type": "text", "text": ...}``) sent as they are."""
Mode = Literal["queue", "steer"]


class Agent:
    """One live root agent of a host: prompt it, steer or cancel it, close it (its log stays on disk)."""

    def __init__(self, host: Host, handle: AgentHandle) -> None:
        self.host = host
        self._handle = handle
        self._closing: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<pydsh.Agent {self.session_id} {self.status}>"

    @property
    def live(self) -> LoopAgent:
        """The agent of the ``agents`` service behind this wrapper (the loop's own object)."""
        return self._handle.agent  # type: ignore[return-value]

    @property
    def session(self) -> Session:
        """The live session log."""
        return self.live.session

    @property
    def session_id(self) -> str:
        return self.live.id

    @property
    def status(self) -> Literal["idle", "running"]:
        return self.live.status

    @property
    def closed(self) -> bool:
        return self._closing is not None

    @property
    def alive(self) -> bool:
        """Whether the agent is still the live one of its session (nothing else disposed it)."""
        return self._closing is None and self.host.registry.get(self.session_id) is self.live

    @property
    def releasable(self) -> bool:
        """Whether closing the agent now loses nothing ahead: it is idle with nothing queued, no managed
        descendant is resident, and no plugin keeps it live (an armed reminder, a goal's next round)."""
        live = self.live
        if not self.alive or live.status != "idle" or live.inbox.has_pending:
            return False
        subagents = self.host.ctx.get(SUBAGENTS)
        if subagents is not None and subagents.descendants(self.session_id):
            return False
        return not self.host.registry.kept(live)

    @property
    def events(self) -> list[Event]:
        """Every event of the session log so far (read-only envelopes)."""
        return list(self.session.events)

    # -- input -----------------------------------------------------------------------------------

    def prompt(self, input: Input) -> Run:
        """``input`` as the next turn: iterating the run sends it and yields its events until the
        agent is idle again."""
        from pydsh.host.run import Run

        self._check_open()
        return Run(self, input)

    async def run(self, input: Input) -> RunResult:
        """Prompt and wait: the final text, finish reason, usage and events of the run."""
        async with self.prompt(input) as run:
            async for _event in run:
                pass
        assert run.result is not None
        return run.result

    async def submit(
        self,
        input: Input,
        *,
        mode: Mode = "queue",
        source: dict[str, Any] | None = None,
        message_id: str | None = None,
    ) -> Receipt:
        """Queue ``input`` as the next turn (``steer``: the next step of a running turn) and return once
        the splice that queued it is on disk, so an acknowledgement never outlives a crash (a log that
        cannot be written: ``HostError``, code ``unavailable``)."""
        from pydsh.contract.agent import user_message

        self._check_open()
        live = self.live
        message = user_message(input, source, message_id=message_id)
        running = live.status == "running"
        if mode == "steer" and running:
            live.steer(message)
        else:
            live.followup(message)
        from pydsh.host.run import Receipt

        receipt = Receipt(message["id"], live.session.seq, running)
        await self._flush()
        return receipt

    def steer(self, input: Input) -> None:
        """Queue ``input`` for the next step of the running turn."""
        from pydsh.contract.agent import user_message

        self._check_open()
        self.live.steer(user_message(input))

    def cancel(self, *, keep_queue: bool = False) -> None:
        """Interrupt the running turn (it ends ``aborted``); queued input is dropped unless ``keep_queue``."""
        self.live.cancel({"kind": "user"}, keep_inbox=keep_queue)

    # -- settling and results ----------------------------------------------------------------------

    async def settle(self, also: Callable[[], Awaitable[None]] | None = None) -> None:
        """Wait until the agent is idle at an unchanged position with every managed descendant settled
        (their settlement turns included), then until its log is on disk; ``also`` runs in each round
        (a frontend's own delivery). A log that cannot be written: ``HostError``, code ``unavailable``."""
        agent = self.live
        subagents = self.host.ctx.get(SUBAGENTS)
        while True:
            await agent.when_idle()
            position = agent.session.seq
            waited = bool(await subagents.wait_for_children(agent)) if subagents is not None else False
            if also is not None:
                await also()
            if not waited and agent.status == "idle" and agent.session.seq == position:
                break
        await self._flush()

    async def _flush(self) -> None:
        from pydsh.session.errors import SessionError

        try:
            await self.host.sessions.flush(self.session)
        except SessionError as exc:
            raise HostError(str(exc), "unavailable") from exc

    async def unsettled(self) -> list[str]:
        """Full names of the managed descendants still running (what an early stop would cut short)."""
        subagents = self.host.ctx.get(SUBAGENTS)
        if subagents is None:
            return []
        running = [a.child_id for a in subagents.descendants(self.session_id) if a.agent.status == "running"]
        return [await subagents.full_name(child) for child in running]

    def result(self, since: int = 0) -> RunResult:
        """The run result of the events from seq ``since`` on (a receipt's ``seq``: that prompt's run)."""
        from pydsh.host.run import run_result

        return run_result(self.session_id, list(self.session.events[since:]))

    # -- closing -----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Dispose the agent's background descendants, interrupt a running turn (queued input kept),
        write the log out and release the agent; ``host.resume_agent(session_id)`` continues it later."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        from pydsh.session.errors import SessionError

        self.host._forget(self)
        errors: list[Exception] = []
        subagents = self.host.ctx.get(SUBAGENTS)
        if subagents is not None:
            try:
                await subagents.drain([self.session_id])
            except Exception as exc:
                errors.append(exc)
        try:
            await self._handle.dispose()
        except SessionError as exc:
            errors.append(HostError(str(exc), "unavailable"))
        except Exception as exc:
            errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup(f'closing agent "{self.session_id}" failed', errors)

    def _check_open(self) -> None:
        if self._closing is not None:
            raise HostError(f'agent "{self.session_id}" is closed', "closed")
