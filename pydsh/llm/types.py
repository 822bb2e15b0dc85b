"""The model contract: the vocabulary as plain-dict TypedDicts, the adapter Protocols and :class:`LlmError`
(spec 04 §2).

Everything here is lossless JSON over ``dict``/``list`` so chunks and messages are logged without
conversion; pydantic is used only at trust boundaries (config, cassettes). An adapter implements
:class:`LlmAdapter` and, optionally, any of the capability Protocols below it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, NotRequired, Protocol, TypedDict, runtime_checkable

from pydsh.kernel.errors import PydshError

BlockType = Literal["text", "reasoning", "tool-call"]


class TextBlock(TypedDict):
    """Visible text (any role)."""

    type: Literal["text"]
    text: str


class ReasoningBlock(TypedDict):
    """Model reasoning, distinct from visible text (assistant only)."""

    type: Literal["reasoning"]
    text: str


class ToolCallBlock(TypedDict):
    """A tool call; ``arguments`` stays raw JSON text in durable form."""

    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str


class ToolChangeBlock(TypedDict):
    """A mid-conversation tool-set change (developer messages only)."""

    type: Literal["tool-addition", "tool-removal"]
    toolName: str


ContentBlock = dict[str, Any]
"""Any block keyed by ``type`` (the TypedDicts above describe the known shapes)."""

Message = dict[str, Any]
"""``{id, role, content, source}`` plus ``toolCallId``/``isError`` on tool results."""


class TokenUsage(TypedDict):
    """Disjoint token counts: ``inputTokens`` excludes cache reads and writes."""

    inputTokens: int
    outputTokens: int
    totalTokens: NotRequired[int]
    cacheReadTokens: NotRequired[int]
    cacheWriteTokens: NotRequired[int]
    reasoningTokens: NotRequired[int]


class LlmFailure(TypedDict):
    """The durable description of a failed call."""

    message: str
    code: str
    status: NotRequired[int]
    providerRetryAfterMs: NotRequired[float]
    requestId: NotRequired[str]


class FinishReason(TypedDict):
    """``stop`` / ``tool-calls`` / ``max-tokens`` / ``aborted`` / ``error`` (the last two carry ``failure``)."""

    kind: Literal["stop", "tool-calls", "max-tokens", "aborted", "error"]
    failure: NotRequired[LlmFailure]


class ReplayEnvelope(TypedDict):
    """Adapter-private replay data stored as ``source.replayState``."""

    response: Any
    blocks: NotRequired[list[Any]]


StreamChunk = dict[str, Any]
"""One of ``block-start``, ``text-delta``, ``reasoning-delta``, ``tool-call-delta``, ``block-end``,
``usage``, ``finish`` (spec 04 §2.4)."""

CHUNK_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "block-start": (frozenset({"type", "index", "blockType"}), frozenset()),
    "text-delta": (frozenset({"type", "index", "text"}), frozenset()),
    "reasoning-delta": (frozenset({"type", "index", "text"}), frozenset()),
    "tool-call-delta": (frozenset({"type", "index", "id", "argumentsDelta"}), frozenset({"name"})),
    "block-end": (frozenset({"type", "index", "block"}), frozenset()),
    "usage": (frozenset({"type", "usage"}), frozenset()),
    "finish": (frozenset({"type", "reason"}), frozenset({"replayState"})),
}
"""Required and optional keys of every chunk type (exact key sets are validated where chunks load)."""

FINISH_KINDS = frozenset({"stop", "tool-calls", "max-tokens", "aborted", "error"})


class ToolSchema(TypedDict):
    """A tool offered to the model; only these fields ever reach the wire."""

    name: str
    description: str
    parameters: dict[str, Any]
    deferLoading: NotRequired[bool]


class LlmCallConfig(TypedDict):
    """The route and budget of one call (the ``request/header`` config)."""

    provider: str
    model: str
    reasoningEffort: NotRequired[str]
    temperature: NotRequired[float]
    maxTokens: NotRequired[int]
    stop: NotRequired[list[str]]


class ReasoningEffort(TypedDict):
    """One selectable effort of a model."""

    id: str
    name: str
    description: NotRequired[str]


class ModelReasoning(TypedDict):
    """The efforts a model offers and its default."""

    efforts: list[ReasoningEffort]
    defaultEffort: NotRequired[str]


class ModelInfo(TypedDict):
    """Advisory catalog entry of one model on one route."""

    provider: str
    id: str
    name: str
    description: NotRequired[str]
    inputModalities: NotRequired[list[str]]
    context: NotRequired[dict[str, int]]
    defaultMaxTokens: NotRequired[int]
    reasoning: NotRequired[ModelReasoning]
    systemPromptUpdate: NotRequired[Literal["in-history"]]
    toolUpdate: NotRequired[Literal["in-history", "addition-only"]]


class ProviderInfo(TypedDict):
    """Display information of one route."""

    id: str
    name: str


RetryPolicy = dict[str, Any]
"""``{mode, maxRetries?, retryableCodes?, backoff?}`` (spec 04 §7.1)."""

GenerateOptions = dict[str, Any]
"""``{provider, model, messages, tools?, reasoningEffort?, maxTokens?, temperature?, stop?, system?,
sessionId?, purpose?, signal}``; ``signal`` is an ``AbortSignal`` and never serialised."""


class LlmAdapter(Protocol):
    """What every provider adapter implements: one streamed call per ``options``."""

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """The call's chunks, ending with exactly one ``finish`` (the service normalises the rest)."""
        ...


@runtime_checkable
class DescribesProviders(Protocol):
    """An adapter that names its routes for display (otherwise a route shows its id)."""

    def provider_info(self, provider: str) -> ProviderInfo: ...


@runtime_checkable
class ListsModels(Protocol):
    """An adapter with an advisory catalog of each route's models."""

    async def list_models(self, provider: str) -> list[ModelInfo]: ...


@runtime_checkable
class ResolvesModels(Protocol):
    """An adapter that knows a model's limits and efforts (otherwise a model is text-only, no defaults)."""

    async def resolve_model(self, provider: str, model: str) -> ModelInfo: ...


@runtime_checkable
class HasRetryPolicy(Protocol):
    """An adapter whose routes carry a retry policy (``llm-retry`` reads it from the prepared call)."""

    def provider_retry_policy(self, provider: str) -> RetryPolicy | None: ...


class LlmError(PydshError):
    """A model-call failure carrying its failure code (spec 04 §2.7)."""

    def __init__(
        self,
        message: str,
        code: str,
        *,
        status: int | None = None,
        provider_retry_after_ms: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.provider_retry_after_ms = provider_retry_after_ms
        self.request_id = request_id

    def failure(self) -> LlmFailure:
        """The ``LlmFailure`` dict (keys omitted when ``None``)."""
        out: LlmFailure = {"message": self.message, "code": self.code}
        if self.status is not None:
            out["status"] = self.status
        if self.provider_retry_after_ms is not None:
            out["providerRetryAfterMs"] = self.provider_retry_after_ms
        if self.request_id is not None:
            out["requestId"] = self.request_id
        return out

    @classmethod
    def from_failure(cls, failure: dict[str, Any]) -> LlmError:
        """Rebuild the exception from a logged ``LlmFailure``."""
        return cls(
            str(failure.get("message", "")),
            str(failure.get("code", "UNKNOWN")),
            status=failure.get("status"),
            provider_retry_after_ms=failure.get("providerRetryAfterMs"),
            request_id=failure.get("requestId"),
        )
