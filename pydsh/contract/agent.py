"""The public face of an agent: the ``Agent`` protocol, its options and message helpers (spec 03 §1)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from pydsh.kernel.cancel import AbortSignal
    from pydsh.kernel.context import Context
    from pydsh.session.log import Session

Status = Literal["idle", "running"]
Target = Literal["next-turn", "next-step"]
UserMessage = dict[str, Any]

MAX_SAFE = 2**53 - 1


@dataclass(frozen=True)
class AgentOptions:
    """Route and budget of an agent; ``None`` means "not chosen by the caller"."""

    provider: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    subagent_depth: int | None = None

    def __post_init__(self) -> None:
        mt = self.max_tokens
        if mt is not None and (type(mt) is not int or not 0 < mt <= MAX_SAFE):
            raise TypeError("agent maxTokens must be a positive safe integer")
        depth = self.subagent_depth
        if depth is not None and (type(depth) is not int or not 0 <= depth <= MAX_SAFE):
            raise TypeError("agent subagentDepth must be a non-negative safe integer")


class Agent(Protocol):
    """A live agent: one session driven through turns and steps."""

    id: str
    options: AgentOptions
    session: Session
    ctx: Context

    @property
    def status(self) -> Status: ...

    def send(self, message: UserMessage, target: Target, wakeup: bool) -> None: ...

    def followup(self, message: UserMessage) -> None:
        """Queue for a later turn and wake the agent."""

    def steer(self, message: UserMessage) -> None:
        """Queue for the next step and wake the agent."""

    def inject(self, message: UserMessage) -> None:
        """Queue for the next step without waking the agent."""

    def cancel(self, cause: dict[str, Any], *, keep_inbox: bool = False) -> None: ...

    async def when_idle(self) -> None: ...

    async def run_maintenance(self, job: Callable[[AbortSignal], Awaitable[Any]]) -> Any: ...


def user_message(
    content: str | list[dict[str, Any]],
    source: dict[str, Any] | None = None,
    *,
    message_id: str | None = None,
) -> UserMessage:
    """A ``UserMessage`` (key order as written in logs: content, source, role, id)."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    return {
        "content": blocks,
        "source": source or {"kind": "user"},
        "role": "user",
        "id": message_id or str(uuid.uuid4()),
    }


def text_of(message: dict[str, Any]) -> str:
    """The concatenated text blocks of a message."""
    return "".join(b.get("text", "") for b in message.get("content", ()) if b.get("type") == "text")
