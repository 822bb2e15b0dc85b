"""``plan-mode``: plan mode as logged per-agent state, the ``exit_plan_mode`` tool and the ``/plan`` switch.

While the log's last ``plan/mode`` says ``{active: true}`` the system prompt carries the plan section
(the row's ``section``); nothing else changes — the sandbox and approvals enforce on their own, and
``exit_plan_mode`` stays registered either way, so switching never changes the tool list. The tool
asks the user through the ``user_questions`` service (one question with the plan as its Markdown
``detail`` and ``intent: plan-review``); approving logs ``plan/mode {active: false}``. Names, texts and
records are DeepSeek Harness's; the tool description and the section are our own words.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import PRE_STEP, PreStep, PreStepDecision
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.agent.prompt import SECTION_ORDER
from pydsh.contract.agent import user_message
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec, ToolOutcome, text
from pydsh.kernel.config import BaseModel, ConfigDict, field_validator
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.kernel.keys import ServiceKey
from pydsh.policy.keys import USER_QUESTIONS
from pydsh.policy.questions import QuestionRequest, UserQuestionError

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent
    from pydsh.session.events import Event
    from pydsh.session.log import Session

RECORD = "plan/mode"
TOOL = "exit_plan_mode"
REVIEW_ID = "plan-review"
APPROVE = "Approve"
KEEP_PLANNING = "Keep planning"
DESCRIPTION = (
    "Only for plan mode. Put your finished plan in front of the user for review; if they approve, plan mode ends. "
    "They either approve (start carrying the plan out at your next step) or keep planning, in which case their "
    "feedback arrives in the tool result: revise the plan and present it again."
)
PARAMETERS = {
    "type": "object",
    "properties": {
        "plan": {
            "type": "string",
            "description": "The whole plan in Markdown, opening with a # heading that gives its name.",
        }
    },
    "required": ["plan"],
}
APPROVED = "Plan approved — plan mode exited; carry out the plan starting with your next step."
DISMISSED = "The user dismissed the plan review to reply in their own words; plan mode remains active."
SWITCHED_ON = "The user switched this session to plan mode."
SWITCHED_OFF = "The user switched this session back to the default mode."
_HEADING = re.compile(r"^#\s+\S")


class PlanFold:
    """Whether plan mode is on: the last ``plan/mode`` record of the log."""

    key = "plan-mode"

    def init(self) -> bool:
        return False

    def fold(self, state: bool, event: Event) -> bool:
        return bool(event["data"]["active"]) if event["type"] == RECORD else state


PLAN_FOLD = PlanFold()


def active(session: Session) -> bool:
    """Whether the session is in plan mode."""
    return bool(session.fold(PLAN_FOLD))


def review_question(plan: str, call_id: str) -> dict[str, Any]:
    """The one question that presents ``plan`` for approval."""
    return {
        "id": REVIEW_ID,
        "header": "Plan review",
        "question": "Approve this plan and leave plan mode?",
        "detail": plan,
        "options": [
            {"label": APPROVE, "description": "Leave plan mode; the plan is carried out from the next step."},
            {"label": KEEP_PLANNING, "description": "Stay in plan mode; feedback goes back to the model."},
        ],
        "intent": {"kind": "plan-review", "approve": APPROVE, "callId": call_id},
    }


class PlanMode:
    """Switches plan mode and reviews plans; ``pending`` holds a switch asked for during a turn."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.pending: dict[str, bool] = {}

    def set(self, agent: Agent, on: bool) -> str:
        """Switch plan mode: ``committed`` (logged now), ``queued`` (at the next step), ``cancelled`` or ``noop``."""
        session = agent.session
        logged = active(session)
        if on == self.pending.get(session.id, logged):
            return "noop"
        if session.open_turn is not None:
            self.pending[session.id] = on
            return "cancelled" if logged == on else "queued"
        self.pending.pop(session.id, None)
        if on == logged:
            return "cancelled"
        session.append(RECORD, {"active": on})
        if session.request_header() is not None:
            agent.inject(narration(on))
        return "committed"

    def command(self, agent: Agent, raw: str) -> dict[str, str]:
        """``/plan``, ``/plan off`` or ``/plan <message>``: switch and, with a message, send it as a prompt."""
        message = raw.strip()
        if message == "off":
            outcome = self.set(agent, False)
            return {"kind": "success", "text": OFF_TEXTS[outcome] if outcome != "noop" else self._noop_off(agent)}
        outcome = self.set(agent, True)
        if message:
            agent.steer(user_message(message, {"kind": "user"}))
        if outcome == "committed":
            return {"kind": "success", "text": "Plan mode on. Use /plan off to leave."}
        return {"kind": "success", "text": "Entering plan mode (applies from the next step). Use /plan off to leave."}

    def _noop_off(self, agent: Agent) -> str:
        if active(agent.session):
            return "Leaving plan mode (applies from the next step)."
        return "Plan mode is already inactive."

    def at_step(self, agent: Agent) -> dict[str, Any] | None:
        """Log a switch asked for during the turn, before the step's request is assembled; its notice."""
        on = self.pending.pop(agent.session.id, None)
        if on is None or on == active(agent.session):
            return None
        agent.session.append(RECORD, {"active": on})
        return narration(on)

    async def exit_plan_mode(self, args: dict[str, Any], exec: ToolExec) -> str | ToolOutcome:
        """Ask the user to approve the plan; on approval leave plan mode."""
        agent = exec.agent
        if agent is None:
            raise ToolError(f"{TOOL} requires a calling agent (no session to switch)")
        if not active(agent.session):
            raise ToolError(f"{TOOL} is only available in plan mode")
        plan = args["plan"]
        if not _HEADING.match(plan.strip()):
            raise ToolError(f"{TOOL} requires a non-empty markdown plan starting with a # heading")
        questions = self.ctx.get(USER_QUESTIONS)
        if questions is None:
            raise ToolError(
                "no user-questions channel is available to review the plan; "
                "ask the user to switch the session mode instead"
            )
        request = QuestionRequest([review_question(plan, exec.call_id)], agent, exec.call_id, exec.signal)
        try:
            (answer,) = await questions.ask(request)
        except UserQuestionError as exc:
            if exc.code != "ASK_ABORTED" or exec.signal.aborted:
                raise
            return ToolOutcome(text(DISMISSED), False, None, concludes_turn=True)
        if answer.selected != (APPROVE,) or answer.custom is not None:
            feedback = answer.custom or ""
            if not feedback:
                raise ToolError("The user chose to keep planning; revise the plan and present it again.")
            raise ToolError(f"The user chose to keep planning; their feedback: {feedback}")
        agent.session.append(RECORD, {"active": False})
        self.pending.pop(agent.session.id, None)
        return APPROVED


OFF_TEXTS = {
    "committed": "Plan mode off.",
    "queued": "Leaving plan mode (applies from the next step).",
    "cancelled": "Plan mode entry cancelled.",
}


def narration(on: bool) -> dict[str, Any]:
    """The notice that tells the model the user switched modes."""
    notice = SWITCHED_ON if on else SWITCHED_OFF
    return user_message([{"type": "text", "text": notice}], {"kind": "plan-mode", "form": "notice", "summary": notice})


PLAN_MODE: ServiceKey[PlanMode] = ServiceKey("plan_mode")


class Config(BaseModel):
    """``section``: the guidance the system prompt carries while plan mode is on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: str

    @field_validator("section")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("PlanModeConfig needs a non-empty `section`")
        return value


name = "plan-mode"
inject = (TOOLS, SYSTEM_PROMPT)


def apply(ctx: Context, config: Config) -> None:
    """Provide the switch, the plan section and the stable exit tool."""
    mode = PlanMode(ctx)
    ctx.provide(PLAN_MODE, mode)

    def section(agent: Any) -> str:
        return config.section if agent is not None and active(agent.session) else ""

    async def at_step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        decision = await nxt()
        if decision["kind"] != "enter" or payload["signal"].aborted:
            return decision
        notice = mode.at_step(payload["agent"])
        if notice is None:
            return decision
        return {**decision, "messages": [*decision.get("messages", []), notice]}

    ctx.require(SYSTEM_PROMPT).section(ctx, "plan:policy", SECTION_ORDER["PLAN_POLICY"], section)
    ctx.on(PRE_STEP, at_step, name="plan-mode")
    ctx.require(TOOLS).register(ctx, ToolDefinition(TOOL, DESCRIPTION, PARAMETERS, mode.exit_plan_mode))
