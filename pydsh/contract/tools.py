"""The tool contract: what the loop, the policy and the tools agree on about one call (spec 05 §2–3).

The loop turns a model's tool call into a :class:`ToolExec`, asks the :data:`TOOLS` service for a
:class:`ToolInvocation` and commits the :class:`ToolOutcome` it returns. Tools raise
:class:`ToolError` for failures the model should read. The ``tools/*`` events carry these types.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

from pydsh.kernel.errors import PydshError
from pydsh.kernel.events import Emit, Waterfall
from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent, UserMessage
    from pydsh.kernel.cancel import AbortSignal
    from pydsh.kernel.context import Context
    from pydsh.kernel.fiber import Disposer
    from pydsh.session.log import Session

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
Content = list[dict[str, Any]]
"""Model-visible content blocks (``{"type": "text", "text": ...}`` and the like)."""
Guard = Callable[["ToolExec"], "str | Awaitable[str | None] | None"]
"""A deny-only check: a denial reason, or ``None`` to let the call through."""
ExecutionMode = Literal["parallel", "exclusive"]


class ErrorInfo(TypedDict, total=False):
    """What ``tool/result.error`` records: the error's class name, its code and an optional reason."""

    name: str
    code: str
    reason: str


ABORTED_BEFORE_DISPATCH: ErrorInfo = {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
ABORTED: ErrorInfo = {"name": "AbortError", "code": "ABORTED"}
INVALID_ARGS: ErrorInfo = {"name": "ToolArgsError", "code": "INVALID_ARGS"}
UNKNOWN_TOOL: ErrorInfo = {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}
TOOL_TIMEOUT: ErrorInfo = {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}


@dataclass
class ToolExec:
    """One call as the loop sees it; also the payload of the ``tools/*`` waterfalls."""

    call_id: str
    name: str
    raw_arguments: str
    arguments: Any
    agent: Agent | None
    session: Session | None
    turn: int | None
    step: int | None
    signal: AbortSignal
    scope: object | None
    parent_call_id: str | None = None
    root_call_id: str | None = None


@dataclass
class ToolOutcome:
    """A call's settled result: model-visible content plus what the log records beside it."""

    content: Content
    is_error: bool
    error: ErrorInfo | None
    meta: Any = None
    additional_contexts: list[UserMessage] = field(default_factory=list)
    concludes_turn: bool = False


def text(value: str) -> Content:
    """One text block."""
    return [{"type": "text", "text": value}]


def failure(message: str, error: ErrorInfo | None = None) -> ToolOutcome:
    """An error outcome: one text block ``Error: <message>``."""
    return ToolOutcome(text(f"Error: {message}"), True, ErrorInfo(**error) if error else None)


def unknown_tool(name: str) -> ToolOutcome:
    """The outcome of a call naming a tool nobody registered."""
    return failure(f'unknown tool "{name}"', UNKNOWN_TOOL)


def aborted_before_dispatch() -> ToolOutcome:
    """The outcome of a call the turn's abort stopped before its body ran."""
    return failure("tool call aborted before dispatch", ABORTED_BEFORE_DISPATCH)


class ToolError(PydshError):
    """A tool-level failure; ``code`` (with ``error_name``) is logged as ``tool/result.error``."""

    error_name = "ToolError"

    def __init__(self, message: str, code: str | None = None, *, name: str | None = None, reason: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        if name is not None:
            self.error_name = name

    def error(self) -> ErrorInfo | None:
        """The logged ``{name, code[, reason]}`` or ``None`` for a plain failure."""
        if self.code is None:
            return None
        out = ErrorInfo(name=self.error_name, code=self.code)
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def failure_of(exc: BaseException) -> ToolOutcome:
    """The error outcome of an exception raised by a tool body."""
    if isinstance(exc, ToolError):
        return failure(exc.message, exc.error())
    return failure(str(exc) or type(exc).__name__)


@dataclass(frozen=True, eq=False)
class ToolDefinition:
    """A model-facing tool: its schema, body and optional hooks (spec 05 §2)."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[[Any, ToolExec], Any]
    render: Callable[[Any, Any], Content] | None = None
    is_concurrency_safe: Callable[[Any], bool] | None = None
    timeout_ms: int | None = None
    finalize_content: Callable[[Content], Content] | None = None
    meta: Callable[[Any, Any], Any] | None = None

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ValueError(f'tool name "{self.name}" must match [A-Za-z0-9_-]{{1,64}}')
        if self.parameters.get("type") != "object":
            raise ValueError(f'tool "{self.name}": parameters must be a JSON Schema with an object root')

    def schema(self) -> dict[str, Any]:
        """What reaches the model: name, description and parameters, in that key order."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolInvocation(Protocol):
    """One call's way through the pipeline: ``prepare`` → ``execute`` → ``commit``."""

    async def prepare(self) -> None:
        """Decide whether the call may run (unknown tool, approval, guards)."""

    async def execute(self) -> None:
        """Run the body unless ``prepare`` already settled the call."""

    async def commit(self) -> ToolOutcome:
        """The call's final outcome, after the post-execute listeners."""
        ...


class Tools(Protocol):
    """The ``tools`` service: scoped definitions, deny-only guards and one pipeline run per call."""

    def register(self, ctx: Context, definition: ToolDefinition) -> Disposer:
        """Add ``definition`` to ``ctx``'s scope for as long as ``ctx``'s plugin is loaded."""
        ...

    def guard(self, ctx: Context, name: str, check: Guard) -> Disposer:
        """Add a deny-only guard under ``name`` in ``ctx``'s scope."""
        ...

    def lookup(self, scope: object | None, name: str) -> ToolDefinition | None:
        """The definition ``name`` resolves to from ``scope``."""
        ...

    def definitions(self, scope: object | None) -> list[ToolDefinition]:
        """Every definition visible from ``scope``, sorted by name."""
        ...

    def schemas(self, scope: object | None) -> list[dict[str, Any]]:
        """What the model sees of the definitions visible from ``scope``."""
        ...

    def guards(self, scope: object | None) -> list[Guard]:
        """The guards visible from ``scope``."""
        ...

    def execution_mode(self, exec: ToolExec) -> ExecutionMode:
        """Whether the call may run beside others (``parallel``) or alone."""
        ...

    def invocation(self, exec: ToolExec) -> ToolInvocation:
        """A fresh pipeline run for ``exec``."""
        ...


TOOLS: ServiceKey[Tools] = ServiceKey("tools")


class PreExecuteDecision(TypedDict, total=False):
    """What a ``tools/pre-execute`` listener decides: allow, deny (with a reason) or ask the user."""

    kind: Literal["allow", "deny", "ask"]
    reason: str
    displayReason: dict[str, str]


class PostExecuteBlock(TypedDict, total=False):
    """A ``tools/post-execute`` listener's veto: the model reads ``feedback`` instead of the result."""

    kind: Literal["block"]
    feedback: str | Content


Settled = ToolOutcome | PostExecuteBlock
"""What a ``tools/post-execute`` listener passes outward: the outcome, or a block an inner listener decided."""

TOOL_PRE_EXECUTE: Waterfall[ToolExec, PreExecuteDecision] = Waterfall(
    "tools/pre-execute", "allow, deny or ask before a call runs; the first listener is asked first"
)
TOOL_EXECUTE: Waterfall[ToolExec, ToolOutcome] = Waterfall(
    "tools/execute", "around argument validation and the body of a call"
)
TOOL_POST_EXECUTE: Waterfall[ToolExec, Settled] = Waterfall(
    "tools/post-execute", "may replace a settled outcome or block it with feedback"
)
TOOL_RESULT: Emit[ToolExec, ToolOutcome] = Emit("tools/result", "after a call's outcome is final")
TOOLS_CHANGED: Emit[()] = Emit("tools/change", "the set of registered tools changed")
