"""The bus events the ``policy`` package dispatches: where frontends answer approvals and questions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydsh.kernel.events import Waterfall

if TYPE_CHECKING:
    from pydsh.policy.approval import ApprovalRequest
    from pydsh.policy.questions import Answer, QuestionRequest

APPROVAL_REQUEST: Waterfall[ApprovalRequest, str] = Waterfall(
    "approval/request", "an answerer returns allowed-once, rejected or cancelled; None asks the next one"
)
USER_QUESTIONS_REQUEST: Waterfall[QuestionRequest, Sequence[Answer]] = Waterfall(
    "user-questions/request", "an answerer returns the user's answers; None asks the next one"
)
