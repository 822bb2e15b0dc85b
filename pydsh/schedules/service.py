"""Plugin ``schedule``: the reminders of every live root session, kept in its log and delivered on time.

Each change is a ``schedule/change`` record of the session, so the reminders are exactly what the log
folds to (:class:`~pydsh.schedules.records.ScheduleFold`). While an agent is live, one timer per agent
waits for its earliest target; when it fires, the due reminders enter the agent's inbox as a follow-up
user message marked ``source: {kind: "schedule"}`` (the host's normal prompt path, so they are logged
and shown like any prompt), then a ``dispatch`` record is appended. A resumed session re-arms from its
log; a reminder that came due while no process held it is delivered at once, and a recurring one only
for its latest missed occurrence (the reference's rule). A delegated subagent has no reminders.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pydsh.agent.hooks import AGENT_CREATED, AGENT_DISPOSED, AgentCreated, AgentRef
from pydsh.agent.keys import AGENTS
from pydsh.contract.agent import user_message
from pydsh.kernel.context import Context
from pydsh.schedules import records
from pydsh.schedules.keys import SCHEDULES
from pydsh.schedules.records import CHANGE, Book, Record, ScheduleFold
from pydsh.schedules.timing import ScheduleInputError, parse_iso
from pydsh.session.log import now_ms
from pydsh.subagents.service import agent_depth

log = logging.getLogger("pydsh.schedules")

FOLD = ScheduleFold()
MAX_WAIT_S = 3600.0
"""The longest single timer: a far target is re-checked hourly, so a clock change cannot strand it."""
SUBAGENT = {"code": "subagent_session", "message": "A delegated subagent cannot use reminders."}


def is_delegated(agent: Any) -> bool:
    """Whether ``agent`` is a delegated child (reminders never reach one)."""
    return agent_depth(agent) > 0


def book_of(session: Any) -> Book:
    """The reminders a session's log folds to."""
    result: Book = session.fold(FOLD)
    return result


class Schedules:
    """Create, list, change and delete an agent's reminders, and deliver them when they come due."""

    def __init__(self, ctx: Context, clock: Callable[[], int] = now_ms) -> None:
        self.ctx = ctx
        self.clock = clock
        self.timers: dict[str, asyncio.TimerHandle] = {}

    # -- management (each returns what the tools render) -------------------------------------------

    def listed(self, agent: Any) -> list[Record]:
        """The agent's active reminders, by target then id."""
        return book_of(agent.session).listed()

    def views(self, session: Any) -> list[dict[str, Any]]:
        """A session's active reminders as the tools and the web page show them."""
        now = self.clock()
        return [records.view(r, now) for r in book_of(session).listed()]

    def create(self, agent: Any, args: dict[str, Any]) -> Record:
        """Log a new reminder from one timing selector of ``args`` and arm it."""
        selector = next(s for s in records.SELECTORS if args.get(s) is not None)
        title, prompt = records.title_of(args.get("title")), records.prompt_of(args.get("prompt"))
        record = records.build(records.head(records.new_id(), title, prompt), selector, args[selector], self.clock())
        agent.session.append(CHANGE, records.create_change(record))
        self.arm(agent)
        return record

    def delete(self, agent: Any, record_id: str) -> dict[str, Any]:
        """Remove an active or ended reminder; an unknown id is ``schedule_not_found``."""
        book = book_of(agent.session)
        if record_id not in book.active and record_id not in book.ended:
            return {"id": record_id, "deleted": False, "code": "schedule_not_found"}
        agent.session.append(CHANGE, records.delete_change(record_id))
        self.arm(agent)
        return {"id": record_id, "deleted": True}

    def update(self, agent: Any, record_id: str, args: dict[str, Any]) -> dict[str, Any]:
        """Change title, prompt or timing in place; the target moves only when the timing really changes."""
        book = book_of(agent.session)
        current = book.active.get(record_id)
        if current is None:
            code = "schedule_ended" if record_id in book.ended else "schedule_not_found"
            return {"id": record_id, "updated": False, "code": code}
        record = self._changed(current, args)
        if record != current:
            agent.session.append(CHANGE, records.update_change(record))
            self.arm(agent)
        return record

    def _changed(self, current: Record, args: dict[str, Any]) -> Record:
        title = current["title"] if args.get("title") is None else records.title_of(args["title"])
        prompt = current["prompt"] if args.get("prompt") is None else records.prompt_of(args["prompt"])
        selector = next((s for s in records.SELECTORS if args.get(s) is not None), None)
        if selector is None or records.same_timing(current, selector, args[selector]):
            return {**current, "title": title, "prompt": prompt}
        return records.build(records.head(current["id"], title, prompt), selector, args[selector], self.clock())

    # -- delivery ---------------------------------------------------------------------------------

    def arm(self, agent: Any) -> None:
        """(Re)start the agent's timer for its earliest target; none when it has no reminders."""
        self.disarm(agent.id)
        if getattr(agent, "disposed", False) or is_delegated(agent):
            return
        targets = [parse_iso(r["scheduledAt"]) for r in book_of(agent.session).active.values()]
        if not targets:
            return
        delay = max(0.0, min((min(targets) - self.clock()) / 1000, MAX_WAIT_S))
        self.timers[agent.id] = asyncio.get_running_loop().call_later(delay, self._fire, agent)

    def disarm(self, agent_id: str) -> None:
        """Stop an agent's timer."""
        timer = self.timers.pop(agent_id, None)
        if timer is not None:
            timer.cancel()

    def _fire(self, agent: Any) -> None:
        self.timers.pop(agent.id, None)
        try:
            self.deliver_due(agent)
        except Exception:
            log.warning("schedule: delivering the reminders of %s failed", agent.id, exc_info=True)
        self.arm(agent)

    def deliver_due(self, agent: Any) -> int:
        """Deliver what is due now: each one-shot alone, the recurring ones as one batch; how many messages."""
        now = self.clock()
        due = [r for r in self.listed(agent) if parse_iso(r["scheduledAt"]) <= now]
        single = [r for r in due if r["kind"] not in records.RECURRING]
        recurring = [r for r in due if r["kind"] in records.RECURRING]
        for record in single:
            self._send(agent, records.one_shot_text(record), [record], now)
        if recurring:
            batch = [(r, records.occurrence(r, now).at) for r in recurring]
            self._send(agent, records.batch_text(batch), recurring, now)
        return len(single) + (1 if recurring else 0)

    def _send(self, agent: Any, text: str, delivered: list[Record], now: int) -> None:
        """Queue the reminder message, then log that its occurrences were delivered."""
        agent.followup(user_message(text, {"kind": "schedule"}))
        for record in delivered:
            agent.session.append(CHANGE, records.dispatch_change(record, now))

    def dispose(self) -> None:
        """Stop every timer."""
        for agent_id in list(self.timers):
            self.disarm(agent_id)


def refusal(agent: Any) -> dict[str, Any] | None:
    """The result every reminder operation gives a delegated subagent."""
    return dict(SUBAGENT) if is_delegated(agent) else None


def input_error(error: ScheduleInputError) -> dict[str, Any]:
    """A refused rule as the tools return it."""
    return {"code": error.code, "message": error.message}


name = "schedule"
inject = (AGENTS,)


def apply(ctx: Context, config: None) -> None:
    """Provide ``schedule`` and keep a timer for every live root agent that has reminders."""
    service = Schedules(ctx)
    ctx.provide(SCHEDULES, service)

    async def on_created(payload: AgentCreated) -> None:
        agent = payload["agent"]
        asyncio.get_running_loop().call_soon(service.arm, agent)

    def on_disposed(payload: AgentRef) -> None:
        service.disarm(payload["agent"].id)

    ctx.on(AGENT_CREATED, on_created)
    ctx.on(AGENT_DISPOSED, on_disposed)
    ctx.require(AGENTS).add_keeper(ctx, lambda agent: agent.id in service.timers)
    for agent in ctx.require(AGENTS).all():
        service.arm(agent)
    ctx.effect(lambda: service.dispose)
