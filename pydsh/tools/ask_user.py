"""The ``ask_user_question`` tool over the ``user_questions`` service (spec 05 §4.12).

Shipped rows keep it off: only a frontend that answers questions (web, terminal UI) turns the
``tool-ask-user`` row on. Enabled with nobody answering, every call fails with ``NO_PROVIDER``.
"""

from __future__ import annotations

import json
from typing import Any

from pydsh.contract.tools import TOOLS, ToolDefinition, ToolExec
from pydsh.kernel.context import Context
from pydsh.policy.keys import USER_QUESTIONS
from pydsh.policy.questions import NO_PROVIDER, QuestionRequest, UserQuestionError, UserQuestions

DESCRIPTION = (
    "Ask the user a concise question when you need confirmation, a choice, or missing information before proceeding."
)
OPTION = {
    "type": "object",
    "additionalProperties": True,
    "properties": {
        "label": {"type": "string", "description": "Short user-facing option label."},
        "description": {"type": "string", "description": "One sentence explaining the tradeoff or impact."},
    },
    "required": ["label"],
}
QUESTION = {
    "type": "object",
    "additionalProperties": True,
    "properties": {
        "id": {"type": "string", "description": "Stable id for this question; echoed in the answer."},
        "question": {"type": "string", "description": "The specific question to ask the user."},
        "header": {
            "type": "string",
            "description": 'Optional short heading for the question, such as "Confirm" or "Choose Mode".',
        },
        "options": {
            "type": "array",
            "description": "Optional choices to show the user. If you recommend one, put it first and append "
            '"(Recommended)" to that label.',
            "items": OPTION,
        },
        "multi_select": {
            "type": "boolean",
            "description": "Whether the user may select more than one option. Defaults to false.",
        },
    },
    "required": ["id", "question"],
}
PARAMETERS = {
    "type": "object",
    "properties": {
        "questions": {"type": "array", "description": "Questions to ask the user before continuing.", "items": QUESTION}
    },
    "required": ["questions"],
}


def question_of(item: dict[str, Any]) -> dict[str, Any]:
    """The answerer's view of one question: the known fields, ``multi_select`` as ``multiSelect``."""
    out = {"id": item["id"], "question": item["question"]}
    for key, target in (("header", "header"), ("options", "options"), ("multi_select", "multiSelect")):
        if key in item:
            out[target] = item[key]
    return out


class AskUserTool:
    """Blocks until the user answers; the result is compact JSON ``{"answers": [...]}``."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def __call__(self, args: dict[str, Any], exec: ToolExec) -> str:
        service: UserQuestions | None = self.ctx.get(USER_QUESTIONS)
        if service is None:
            raise UserQuestionError(NO_PROVIDER, "NO_PROVIDER")
        request = QuestionRequest([question_of(q) for q in args["questions"]], exec.agent, exec.call_id, exec.signal)
        answers = await service.ask(request)
        return json.dumps({"answers": [a.to_json() for a in answers]}, ensure_ascii=False, separators=(",", ":"))


name = "tool-ask-user"
inject = (TOOLS,)


def apply(ctx: Context, config: None) -> None:
    """Register ``ask_user_question``."""
    ctx.require(TOOLS).register(ctx, ToolDefinition("ask_user_question", DESCRIPTION, PARAMETERS, AskUserTool(ctx)))
