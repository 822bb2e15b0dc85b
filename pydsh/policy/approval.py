"""The ``approval`` service: asks routed to answerers, logged and failing closed (spec 05 §5.7–5.8).

Every ask is logged as ``approval/asked`` then ``approval/decided``. The policy ``never`` rejects
without consulting anyone; otherwise the ``approval/request`` waterfall (scoped to the agent) lets
the first answerer decide, raced against the call's signal. No answer means ``unavailable``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer
from pydsh.policy.hooks import APPROVAL_REQUEST
from pydsh.policy.keys import APPROVAL, PERMISSIONS
from pydsh.policy.state import APPROVAL_POLICY, POLICIES
from pydsh.session.log import Session

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent
    from pydsh.kernel.cancel import AbortSignal


log = logging.getLogger("pydsh.approval")

OUTCOMES = frozenset({"allowed-once", "rejected", "cancelled", "unavailable"})
CONTEXT_TEXT = {
    "ask": (
        "Approval prompts are enabled in this session: operations that require approval may ask through the "
        "configured answerers; without an available answerer, the request fails closed."
    ),
    "never": (
        "Approval prompts are disabled in this session: actions that require approval are rejected automatically "
        "— do not request sandbox escalation (do not set `sandbox_permissions`)."
    ),
}


@dataclass(frozen=True)
class ApprovalRequest:
    """What an answerer sees: who asks, for which tool call, and why (arguments are in the logged call)."""

    agent: Agent
    tool_name: str
    call_id: str | None = None
    reason: str | None = None
    display_reason: dict[str, str] | None = None
    signal: AbortSignal | None = None


Answerer = Callable[[ApprovalRequest], "Awaitable[str | None] | str | None"]


def answering(answerer: Callable[[Any], Any]) -> Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]:
    """A waterfall listener asking ``answerer`` (sync or async); ``None`` passes to the next answerer."""

    async def listener(request: Any, next: Callable[[], Awaitable[Any]]) -> Any:
        answer = answerer(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return await next() if answer is None else answer

    return listener


class Approval:
    """Approval policy per session, answerer registration and ``request``."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def policy(self, session: Session) -> str:
        """The session's approval policy: its last ``approval/policy``, else the configured default."""
        policy = session.fold(APPROVAL_POLICY)
        if policy in POLICIES:
            return str(policy)
        permissions = self.ctx.get(PERMISSIONS)
        return str(permissions.default_policy) if permissions is not None else "ask"

    def context_text(self, agent: Agent | None) -> str | None:
        """The ``approval:policy`` runtime context of ``agent``'s session."""
        return CONTEXT_TEXT[self.policy(agent.session)] if agent is not None else None

    def add_answerer(self, ctx: Context, answerer: Answerer) -> Disposer:
        """Answer asks seen from ``ctx``'s scope; ``None`` delegates to the next answerer."""
        return ctx.on(APPROVAL_REQUEST, answering(answerer))

    async def request(
        self,
        agent: Agent,
        tool_name: str,
        *,
        call_id: str | None = None,
        reason: str | None = None,
        display_reason: dict[str, str] | None = None,
        signal: AbortSignal | None = None,
    ) -> str:
        """Ask for ``allowed-once``; returns one of ``allowed-once | rejected | cancelled | unavailable``."""
        session = agent.session
        if session.open_turn is None:
            raise RuntimeError(f'approval for tool "{tool_name}" must be requested inside an open turn')
        ask_id = str(uuid.uuid4())
        asked: dict[str, Any] = {"id": ask_id, "toolName": tool_name}
        if call_id is not None:
            asked["callId"] = call_id
        if reason is not None:
            asked["reason"] = reason
        session.append("approval/asked", asked)
        request = ApprovalRequest(agent, tool_name, call_id, reason, display_reason, signal)
        outcome = "cancelled"
        try:
            outcome = await self._decide(request)
        finally:
            session.append("approval/decided", {"id": ask_id, "outcome": outcome})
        return outcome

    async def _decide(self, request: ApprovalRequest) -> str:
        signal = request.signal
        if signal is not None and signal.aborted:
            return "cancelled"
        if self.policy(request.agent.session) == "never":
            return "rejected"
        answer = asyncio.ensure_future(self._answer(request))
        if signal is None:
            return await answer
        aborted = asyncio.ensure_future(signal.wait())
        try:
            await asyncio.wait({answer, aborted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (answer, aborted):
                if not task.done():
                    task.cancel()
        return answer.result() if answer.done() and not answer.cancelled() else "cancelled"

    async def _answer(self, request: ApprovalRequest) -> str:
        try:
            answer = await self.ctx.waterfall(APPROVAL_REQUEST, request, _unavailable, scope=request.agent)
        except Exception:
            log.warning("an approval answerer failed", exc_info=True)
            return "unavailable"
        return answer if answer in OUTCOMES else "unavailable"


def _unavailable() -> str:
    return "unavailable"


name = "approval"
optional = (SYSTEM_PROMPT,)


def apply(ctx: Context, config: None) -> None:
    """Provide ``approval`` and the ``approval:policy`` runtime context."""
    approval = Approval(ctx)
    ctx.provide(APPROVAL, approval)
    system_prompt = ctx.get(SYSTEM_PROMPT)
    if system_prompt is not None:
        system_prompt.context(ctx, "approval:policy", 115, approval.context_text, interpolate=False)
