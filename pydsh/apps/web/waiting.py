"""What waits for the person at the page: tool approvals, user questions and queued prompts (spec 12 F27,
F36, F37). The hub installs this as the approval and question answerer; the page decides and answers."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydsh.agent.inbox import INBOX
from pydsh.apps.web.digest import Digest
from pydsh.apps.web.errors import ApiError, not_found
from pydsh.host.asks import call_arguments as _call_arguments
from pydsh.host.asks import open_ask as _open_ask
from pydsh.policy.questions import Answer, QuestionRequest

if TYPE_CHECKING:
    from pydsh.apps.web.hub import WebHub
    from pydsh.session.events import Event
    from pydsh.session.log import Session


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class PendingApproval:
    """An ask waiting for the browser; ``future`` resolves to the outcome."""

    approval_id: str
    session_id: str
    tool_name: str
    call_id: str | None
    reason: str | None
    arguments: Any
    asked_at: int
    future: asyncio.Future[str] = field(repr=False)

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"approvalId": self.approval_id, "sessionId": self.session_id, "toolName": self.tool_name}
        if self.call_id is not None:
            out["callId"] = self.call_id
        if self.reason is not None:
            out["reason"] = self.reason
        if self.arguments is not None:
            out["arguments"] = self.arguments
        out["askedAt"] = self.asked_at
        return out


@dataclass
class PendingQuestion:
    """A set of user questions waiting for the browser; ``future`` resolves to the answers."""

    request: QuestionRequest
    session_id: str
    asked_at: int
    future: asyncio.Future[list[Answer]] = field(repr=False)

    def view(self) -> dict[str, Any]:
        return {"requestId": self.request.request_id, "questions": self.request.questions, "askedAt": self.asked_at}


class Waiting:
    """Pending approvals and questions of the hub's sessions, and the ``Pending`` value of a session."""

    def __init__(self, hub: WebHub) -> None:
        self.hub = hub
        self.approvals: dict[str, PendingApproval] = {}
        self.questions: dict[str, PendingQuestion] = {}
        self.settled: set[str] = set()

    def cancel_all(self) -> None:
        """Resolve everything that waits as cancelled (the server is stopping)."""
        for pending in list(self.approvals.values()):
            if not pending.future.done():
                pending.future.set_result("cancelled")
        for question in list(self.questions.values()):
            if not question.future.done():
                question.future.cancel()

    # -- approvals ------------------------------------------------------------------------------

    async def answer_approval(self, request: Any) -> str:
        """The approval answerer (F36): publish a pending entry and wait for the browser's decision."""
        session = request.agent.session
        ask_id = _open_ask(session.events, request.tool_name, request.call_id)
        pending = PendingApproval(
            approval_id=ask_id or str(uuid.uuid4()),
            session_id=session.id,
            tool_name=request.tool_name,
            call_id=request.call_id,
            reason=request.reason,
            arguments=_call_arguments(session.events, request.call_id),
            asked_at=now_ms(),
            future=asyncio.get_running_loop().create_future(),
        )
        if self.hub.stopping:
            return "cancelled"
        self.approvals[pending.approval_id] = pending
        self.hub.streams.pending_changed(session.id)
        try:
            return await pending.future
        finally:
            self.approvals.pop(pending.approval_id, None)
            self.settled.add(pending.approval_id)
            self.hub.streams.pending_changed(session.id)

    def decide(self, session_id: str, approval_id: str, outcome: str) -> None:
        """First answer wins; a settled ask is 409, an unknown one 404."""
        pending = self.approvals.get(approval_id)
        if pending is None or pending.session_id != session_id:
            if approval_id in self.settled or self._asked_in_log(session_id, approval_id):
                raise ApiError(409, "already_decided", "This approval was already decided.")
            raise not_found(f'Approval "{approval_id}"')
        if pending.future.done():
            raise ApiError(409, "already_decided", "This approval was already decided.")
        pending.future.set_result(outcome)

    def _asked_in_log(self, session_id: str, approval_id: str) -> bool:
        session = self.hub.store.get(session_id)
        return session is not None and any(
            e["type"] == "approval/asked" and e["data"].get("id") == approval_id for e in session.events
        )

    # -- questions ------------------------------------------------------------------------------

    async def answer_questions(self, request: QuestionRequest) -> list[Answer] | None:
        """The user-questions answerer (F37): publish the questions and wait for the browser's answers."""
        agent = request.agent
        if agent is None or self.hub.stopping:
            return None
        pending = PendingQuestion(
            request=request,
            session_id=agent.id,
            asked_at=now_ms(),
            future=asyncio.get_running_loop().create_future(),
        )
        self.questions[request.request_id] = pending
        self.hub.streams.pending_changed(agent.id)
        try:
            return await pending.future
        finally:
            self.questions.pop(request.request_id, None)
            self.settled.add(request.request_id)
            self.hub.streams.pending_changed(agent.id)

    def answer(self, session_id: str, request_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Deliver answers (or a skip) to a waiting question set: 404 unknown, 409 settled, 422 bad id/option."""
        pending = self.questions.get(request_id)
        if pending is None or pending.session_id != session_id or pending.future.done():
            if request_id in self.settled or (pending is not None and pending.future.done()):
                raise ApiError(409, "already_answered", "These questions were already answered.")
            raise not_found(f'Question "{request_id}"')
        request = pending.request
        if body.get("skip"):
            answers = request.skipped()
        else:
            try:
                answers = request.answers_from_json(body)
            except ValueError as exc:
                raise ApiError(422, "invalid_answer", f"{str(exc)[:1].upper()}{str(exc)[1:]}.") from None
        given = {a.id: a for a in answers}
        complete = [given.get(str(q["id"]), Answer(str(q["id"]))) for q in request.questions]
        pending.future.set_result(complete)
        return {"answers": [a.to_json() for a in complete]}

    # -- the Pending value ----------------------------------------------------------------------

    def pending(self, session_id: str, stored: Session | Digest | None = None) -> dict[str, Any]:
        """The ``Pending`` value of a session (§4.1); ``stored`` is its log (or its digest) when it may be offline."""
        return {
            "approvals": [p.view() for p in self.approvals.values() if p.session_id == session_id],
            "questions": [q.view() for q in self.questions.values() if q.session_id == session_id],
            "queued": self._queued(session_id, stored),
        }

    def _queued(self, session_id: str, stored: Session | Digest | None) -> list[dict[str, Any]]:
        """The user's prompts still in the inbox, with when each was queued: the live agent's inbox, else the
        one an offline session's log keeps (they run when the session is next opened, so they must show)."""
        agent = self.hub.agents.get(session_id)
        inbox = getattr(agent, "inbox", None)
        if inbox is not None and agent is not None:
            events = agent.session.events
            lists = (("queue", inbox.next_turn), ("steer", inbox.next_step))
        elif isinstance(stored, Digest):
            events = stored.splices
            lists = (("queue", stored.inbox["next-turn"]), ("steer", stored.inbox["next-step"]))
        elif stored is not None:
            events = stored.events
            kept = stored.fold(INBOX)
            lists = (("queue", kept["next-turn"]), ("steer", kept["next-step"]))
        else:
            return []
        waiting = [(mode, m) for mode, messages in lists for m in messages if m.get("source", {}).get("kind") == "user"]
        times = _insert_times(events, {m["id"] for _mode, m in waiting})
        return [
            {
                "messageId": message["id"],
                "text": "".join(b.get("text", "") for b in message["content"]),
                "mode": mode,
                "createdAt": times.get(message["id"], 0),
            }
            for mode, message in waiting
        ]


def _insert_times(events: list[Event], ids: set[str]) -> dict[str, int]:
    """When each of ``ids`` entered the inbox (the time of its splice), newest splices first."""
    found: dict[str, int] = {}
    for event in reversed(events):
        if len(found) == len(ids):
            break
        if event["type"] == "agent/inbox/spliced":
            for message in event["data"]["inserted"]:
                if message["id"] in ids:
                    found.setdefault(message["id"], int(event["time"]))
    return found
