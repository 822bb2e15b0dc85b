"""The ``user_questions`` service: the seam interactive frontends fill to answer the model's questions.

A frontend (web, terminal UI) registers an answerer with :meth:`UserQuestions.add_answerer`; the
``ask_user_question`` tool (spec 05 §4.12) asks through :meth:`UserQuestions.ask`, which routes the
request through the ``user-questions/request`` waterfall scoped to the calling agent. Only the
live root agent may ask: a delegated child would block on a human nobody is watching for it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydsh.agent.keys import AGENTS
from pydsh.contract.tools import ToolError
from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer
from pydsh.policy.approval import answering
from pydsh.policy.hooks import USER_QUESTIONS_REQUEST
from pydsh.policy.keys import USER_QUESTIONS

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent
    from pydsh.kernel.cancel import AbortSignal


NO_PROVIDER = "no user-questions answerer accepted the request"
DELEGATED = (
    "human interaction is unavailable while the calling agent is owned by another live agent; include the "
    "unresolved question or decision in the child agent's final result"
)
NOT_LIVE = "human interaction requires the exact live calling agent when an agent is supplied"
ABORTED = "ask_user_question was aborted before the user answered"


class UserQuestionError(ToolError):
    """A failed ask; ``code`` is one of ``NO_PROVIDER``, ``DELEGATED_CALLER``, ``CALLER_NOT_LIVE``, ``ASK_ABORTED``."""

    error_name = "UserQuestionError"


@dataclass(frozen=True)
class Answer:
    """The user's answer to one question: chosen option labels and, when typed, free text."""

    id: str
    selected: tuple[str, ...] = ()
    custom: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"id", "selected", "custom"?}`` as the model reads it."""
        out: dict[str, Any] = {"id": self.id, "selected": list(self.selected)}
        if self.custom is not None:
            out["custom"] = self.custom
        return out


@dataclass(frozen=True)
class QuestionRequest:
    """What an answerer sees: the questions (``id``, ``question``, ``header``?, ``options``?, ``multiSelect``?)."""

    questions: list[dict[str, Any]]
    agent: Agent | None = None
    call_id: str | None = None
    signal: AbortSignal | None = None
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def skipped(self) -> list[Answer]:
        """Every question answered with nothing selected (the frontend's Skip)."""
        return [Answer(str(q["id"])) for q in self.questions]

    def answers_from_json(self, value: Any) -> list[Answer]:
        """Parse a frontend's ``{"answers": [{id, selected, custom?}]}``; ``ValueError`` names the first problem."""
        items = value.get("answers") if isinstance(value, dict) else None
        if not isinstance(items, list):
            raise ValueError('answers must be an object with an "answers" array')
        by_id = {str(q["id"]): q for q in self.questions}
        answers = []
        for item in items:
            if not isinstance(item, dict) or item.get("id") not in by_id:
                raise ValueError(f"unknown question id {item.get('id') if isinstance(item, dict) else item!r}")
            selected, custom = item.get("selected", []), item.get("custom")
            if not isinstance(selected, list) or not all(isinstance(s, str) for s in selected):
                raise ValueError(f'answer "{item["id"]}": selected must be an array of option labels')
            labels = {o.get("label") for o in by_id[item["id"]].get("options") or [] if isinstance(o, dict)}
            unknown = [s for s in selected if s not in labels]
            if unknown:
                raise ValueError(f'answer "{item["id"]}": unknown option {unknown[0]!r}')
            if custom is not None and not isinstance(custom, str):
                raise ValueError(f'answer "{item["id"]}": custom must be a string')
            answers.append(Answer(item["id"], tuple(selected), custom))
        return answers


class QuestionAnswerer(Protocol):
    """Answers a request (a list of :class:`Answer`), or returns ``None`` to let the next answerer decide."""

    def __call__(self, request: QuestionRequest, /) -> Awaitable[Sequence[Answer] | None] | Sequence[Answer] | None:
        """Ask the user; may wait as long as the user takes (the request's signal cancels it)."""


class UserQuestions:
    """Answerer registration and ``ask`` (spec 05 §4.12)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._owners: list[Callable[[Agent], bool]] = []

    def add_owner_check(self, ctx: Context, owned: Callable[[Agent], bool]) -> Disposer:
        """Refuse questions from agents ``owned`` says another live agent owns (e.g. a delegated child)."""
        self._owners.append(owned)
        return ctx.register(lambda: self._owners.remove(owned))

    def add_answerer(self, ctx: Context, answerer: QuestionAnswerer) -> Disposer:
        """Answer questions asked from ``ctx``'s scope until the returned disposer runs (or ``ctx`` unloads)."""
        return ctx.on(USER_QUESTIONS_REQUEST, answering(answerer))

    async def ask(self, request: QuestionRequest) -> list[Answer]:
        """The answers in question order (one left out counts as skipped); raises ``UserQuestionError``."""
        signal = request.signal
        if signal is not None and signal.aborted:
            raise UserQuestionError(ABORTED, "ASK_ABORTED")
        if request.agent is not None:
            self._check_caller(request.agent)
        answer = asyncio.ensure_future(self._answer(request))
        if signal is not None:
            aborted = asyncio.ensure_future(signal.wait())
            try:
                await asyncio.wait({answer, aborted}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (answer, aborted):
                    if not task.done():
                        task.cancel()
            if not answer.done() or answer.cancelled():
                raise UserQuestionError(ABORTED, "ASK_ABORTED")
        given = {a.id: a for a in await answer}
        return [given.get(str(q["id"]), Answer(str(q["id"]))) for q in request.questions]

    def _check_caller(self, agent: Agent) -> None:
        agents = self.ctx.get(AGENTS)
        if agents is None or agents.get(agent.id) is not agent:
            raise UserQuestionError(NOT_LIVE, "CALLER_NOT_LIVE")
        if any(owned(agent) for owned in self._owners):
            raise UserQuestionError(DELEGATED, "DELEGATED_CALLER")

    async def _answer(self, request: QuestionRequest) -> Sequence[Answer]:
        answers = await self.ctx.waterfall(USER_QUESTIONS_REQUEST, request, _no_provider, scope=request.agent)
        if not isinstance(answers, Sequence) or not all(isinstance(a, Answer) for a in answers):
            raise UserQuestionError(f"a user-questions answerer returned {type(answers).__name__}, not answers")
        return answers


def _no_provider() -> Sequence[Answer]:
    raise UserQuestionError(NO_PROVIDER, "NO_PROVIDER")


name = "user-questions"


def apply(ctx: Context, config: None) -> None:
    """Provide ``user_questions``; frontends that can ask the user add answerers to it."""
    ctx.provide(USER_QUESTIONS, UserQuestions(ctx))
