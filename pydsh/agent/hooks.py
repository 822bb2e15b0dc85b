"""The bus events the ``agent`` package dispatches, with their payloads and the order of known listeners.

Waterfall listeners wrap each other, the first outermost; each event names the shipped listeners it
knows in the order they run (``order``), and other listeners place themselves with ``before``/``after``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from pydsh.kernel.events import Emit, Serial, Waterfall

if TYPE_CHECKING:
    from pydsh.agent.prompt import PromptAssembly
    from pydsh.contract.agent import Agent, Status, UserMessage
    from pydsh.kernel.cancel import AbortSignal


class AgentStatus(TypedDict):
    """An agent became idle or running."""

    agent: Agent
    status: Status


class AgentFailed(TypedDict):
    """A turn ended with an error that was not the model's (those are logged as the turn's end)."""

    agent: Agent
    turn: int
    step: int
    error: BaseException


class AgentCreated(TypedDict):
    """A new or resumed agent, before its first turn; ``source`` says who made it."""

    agent: Agent
    source: Any
    signal: AbortSignal | None


class AgentRef(TypedDict):
    """Just the agent (``agent/disposed``)."""

    agent: Agent


class InboxChange(TypedDict):
    """One pending message entered, was claimed by a turn, or was discarded."""

    agent: Agent
    message: UserMessage
    turn: NotRequired[int]


class StepPreparing(TypedDict):
    """A step claimed its input and is about to run the pre-step listeners."""

    agent: Agent
    turn: int
    step: int
    claimed: list[UserMessage]


class PreStep(TypedDict):
    """The claimed input of a step, before it reaches the model."""

    agent: Agent
    messages: list[UserMessage]
    turn: int
    step: int
    signal: AbortSignal


class PreStepDecision(TypedDict):
    """Enter the step with ``messages`` (what the model reads) or reject it."""

    kind: Literal["enter", "reject"]
    messages: NotRequired[list[UserMessage]]
    startsRequestSeries: NotRequired[bool]


class RequestError(TypedDict):
    """A model call failed; a listener may answer ``{"kind": "retry"}``."""

    agent: Agent
    turn: int
    step: int
    provider: str
    failure: dict[str, Any]
    retryPolicy: dict[str, Any] | None
    signal: AbortSignal


class RetryAnswer(TypedDict):
    """Run the step's model call again."""

    kind: Literal["retry"]


class TurnStopping(TypedDict):
    """The turn has no more input; a listener may still add some before it ends."""

    agent: Agent
    turn: int
    signal: AbortSignal


class StepRequest(TypedDict):
    """Which agent step the route is being chosen for."""

    agent: Agent
    turn: int
    step: int
    signal: AbortSignal


class PromptAssemble(TypedDict):
    """A system prompt being assembled for ``agent``."""

    assembly: PromptAssembly
    agent: Agent | None
    signal: AbortSignal | None


class AssistantStream(TypedDict):
    """One live frame of the assistant message being streamed (not logged; the message is)."""

    agent: Agent
    frame: dict[str, Any]


AGENT_CREATED: Serial[AgentCreated, None] = Serial("agent/created", "an agent exists and has not run yet")
AGENT_DISPOSED: Emit[AgentRef] = Emit("agent/disposed", "an agent was disposed")
AGENT_STATUS: Emit[AgentStatus] = Emit("agent/status", "an agent became idle or running")
AGENT_ERROR: Emit[AgentFailed] = Emit("agent/error", "a turn failed outside the model call")
INBOX_INSERTED: Emit[InboxChange] = Emit("agent/inbox/inserted", "a message is pending")
INBOX_CLAIMED: Emit[InboxChange] = Emit("agent/inbox/claimed", "a turn took a pending message")
INBOX_DISCARDED: Emit[InboxChange] = Emit("agent/inbox/discarded", "a pending message was dropped")
STEP_PREPARING: Emit[StepPreparing] = Emit("agent/step-preparing", "a step claimed its input")
PRE_STEP: Waterfall[PreStep, PreStepDecision] = Waterfall(
    "agent/pre-step",
    "shapes what the model reads at a step: commands, checkpoints, instructions, skills, compaction",
    order=(
        "model-selection",
        "command-compact",
        "command-schedule",
        "mcp-prompt-commands",
        "goal-round-driver",
        "plan-mode",
        "time-context",
        "session-checkpoint-policy",
        "instructions",
        "skills-invocation",
        "skills-catalog",
        "compaction",
    ),
)
REQUEST_ERROR: Waterfall[RequestError, RetryAnswer | None] = Waterfall(
    "agent/request-error", "whether a failed model call is tried again", order=("llm-retry", "compaction")
)
TURN_STOPPING: Serial[TurnStopping, None] = Serial("agent/turn-stopping", "the turn is about to end")
AGENT_REQUEST: Waterfall[StepRequest, dict[str, Any]] = Waterfall(
    "agent/request",
    "proposes the route (provider, model, effort) of a step's model call",
    order=("agent-default-model", "model-selection"),
)
PROMPT_ASSEMBLE: Waterfall[PromptAssemble, PromptAssembly] = Waterfall(
    "system-prompt/assemble", "may change the assembled system prompt", order=("agent-presets", "model-selection")
)
ASSISTANT_STREAM: Emit[AssistantStream] = Emit("agent/assistant-stream", "a live frame of the streamed answer")
