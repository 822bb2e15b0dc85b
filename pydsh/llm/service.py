"""The ``llm`` service: adapter registry, call preparation and the stream-contract normaliser (spec 04 §3).

Adapters register per route (provider id). ``prepare_call`` resolves a call config against the
route's model info; ``stream`` runs the ``llm/stream`` waterfall (listeners may serve or wrap a
route; ``next()`` reaches the adapter) and normalises whatever comes back so the caller always
sees block indexes in first-seen order and exactly one terminal ``finish`` chunk.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydsh.kernel.cancel import NEVER, AbortError, AbortSignal
from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer
from pydsh.kernel.invariants import InvariantError
from pydsh.llm.hooks import ADAPTERS_UPDATED, LLM_STREAM, AdaptersUpdated
from pydsh.llm.keys import LLM
from pydsh.llm.prefix import PrefixCache, frozen_run
from pydsh.llm.types import (
    CHUNK_KEYS,
    DescribesProviders,
    HasRetryPolicy,
    ListsModels,
    LlmAdapter,
    LlmError,
    ModelInfo,
    ProviderInfo,
    ResolvesModels,
    StreamChunk,
)

Projection = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Options in, the options an adapter is to see out (the input is frozen: return a copy to change it)."""

log = logging.getLogger("pydsh.llm")

CONFIG_KEYS = ("provider", "model", "reasoningEffort", "temperature", "maxTokens", "stop")
EMPTY_MESSAGE = "model returned a completed response with no content"


def unsupported_effort(provider: str, model: str, effort: object) -> LlmError:
    """The exact error for an effort the model does not offer."""
    return LlmError(
        f'provider "{provider}" model "{model}" does not support reasoning effort "{effort}"',
        "UNSUPPORTED_REASONING_EFFORT",
    )


def no_adapter(provider: str) -> LlmError:
    """The exact error for a route nobody serves."""
    return LlmError(f'no adapter registered for provider "{provider}"', "NO_ADAPTER")


@dataclass(frozen=True)
class PreparedCall:
    """One resolved call bound to one adapter registration; ``stream`` may run once."""

    config: dict[str, Any]
    adapter_defaults: dict[str, bool]
    context_window: int | None
    retry_policy: dict[str, Any] | None
    system_prompt_update: str | None
    tool_update: str | None
    _run: Callable[[dict[str, Any]], AsyncIterator[StreamChunk]] = field(repr=False, compare=False)
    _used: list[bool] = field(default_factory=list, repr=False, compare=False)

    def stream(self, options: dict[str, Any]) -> AsyncIterator[StreamChunk]:
        """Stream the call; ``options`` must repeat this call's config (``INVALID_PREPARED_CALL``)."""
        if self._used:
            raise LlmError("a prepared call can be streamed only once", "INVALID_PREPARED_CALL")
        for key in CONFIG_KEYS:
            if options.get(key) != self.config.get(key):
                raise LlmError(f"stream options change the prepared {key}", "INVALID_PREPARED_CALL")
        self._used.append(True)
        return self._run(options)


class LlmService:
    """Adapter registry plus the ``prepare_call`` / ``stream`` front the agent loop uses."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._routes: dict[str, LlmAdapter] = {}
        self._projections: list[Projection] = []
        self._gated: PrefixCache[None] = PrefixCache()
        """By session and adapter, the logged messages found to carry no other adapter's replay state (so a
        step checks the messages it adds, not the whole history); emptied whenever the routes change."""

    # -- registry -------------------------------------------------------------------------

    def register_adapter(self, ctx: Context, providers: list[str], adapter: LlmAdapter) -> Disposer:
        """Route ``providers`` to ``adapter`` as an effect of ``ctx``'s fiber."""
        for provider in providers:
            owner = self._routes.get(provider)
            if owner is not None and owner is not adapter:
                raise LlmError(f'an adapter for provider "{provider}" is already registered', "DUPLICATE_ADAPTER")
        added = [p for p in dict.fromkeys(providers) if p not in self._routes]
        for provider in added:
            self._routes[provider] = adapter
        if added:
            self._gated = PrefixCache()
            self.ctx.emit(ADAPTERS_UPDATED, AdaptersUpdated(providers=list(self._routes)))

        def remove() -> None:
            removed = [p for p in added if self._routes.get(p) is adapter]
            for provider in removed:
                del self._routes[provider]
            if removed:
                self._gated = PrefixCache()
                self.ctx.emit(ADAPTERS_UPDATED, AdaptersUpdated(providers=list(self._routes)))

        return ctx.register(remove)

    def add_projection(self, ctx: Context, projection: Projection) -> Disposer:
        """Have ``projection`` rewrite the options of every call that reaches an adapter (say, to put back the
        bytes of images the log holds by reference), as an effect of ``ctx``'s fiber."""
        self._projections.append(projection)
        return ctx.register(lambda: self._projections.remove(projection))

    def has_adapter(self, provider: str) -> bool:
        return provider in self._routes

    def adapter_for(self, provider: str) -> LlmAdapter:
        """The adapter serving ``provider`` (``NO_ADAPTER`` when none)."""
        adapter = self._routes.get(provider)
        if adapter is None:
            raise no_adapter(provider)
        return adapter

    def list_providers(self) -> list[ProviderInfo]:
        """Display info of every registered route."""
        out: list[ProviderInfo] = []
        for provider, adapter in self._routes.items():
            if isinstance(adapter, DescribesProviders):
                out.append(adapter.provider_info(provider))
            else:
                out.append({"id": provider, "name": provider})
        return out

    async def list_models(self, provider: str) -> list[ModelInfo]:
        """The route's advisory catalog."""
        adapter = self.adapter_for(provider)
        return list(await adapter.list_models(provider)) if isinstance(adapter, ListsModels) else []

    async def catalogs(self) -> list[tuple[ProviderInfo, list[ModelInfo]]]:
        """Every route with its catalog; a route whose listing fails is logged and shown with no models."""
        out: list[tuple[ProviderInfo, list[ModelInfo]]] = []
        for info in self.list_providers():
            try:
                models = await self.list_models(info["id"])
            except Exception:
                log.warning("listing the models of provider %s failed", info["id"], exc_info=True)
                models = []
            out.append((info, models))
        return out

    async def resolve_model_info(self, provider: str, model: str) -> ModelInfo:
        """Model info of ``model`` on ``provider``; unlisted models still resolve (text-only)."""
        adapter = self.adapter_for(provider)
        if not isinstance(adapter, ResolvesModels):
            return {"provider": provider, "id": model, "name": model}
        return await adapter.resolve_model(provider, model)

    async def resolve_call_config(self, config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, bool]]:
        """``config`` with the model's default ``maxTokens``/``reasoningEffort`` filled, and which were filled."""
        provider, model = config["provider"], config["model"]
        info = await self.resolve_model_info(provider, model)
        return materialise(config, info)

    async def prepare_call(self, config: dict[str, Any], signal: AbortSignal | None = None) -> PreparedCall:
        """Validate and resolve ``config`` against one adapter registration (before any I/O)."""
        if signal is not None:
            signal.throw_if_aborted()
        provider = config["provider"]
        adapter = self.adapter_for(provider)
        info = await self.resolve_model_info(provider, config["model"])
        resolved, defaults = materialise(config, info)
        return PreparedCall(
            config=resolved,
            adapter_defaults=defaults,
            context_window=(info.get("context") or {}).get("contextWindow"),
            retry_policy=adapter.provider_retry_policy(provider) if isinstance(adapter, HasRetryPolicy) else None,
            system_prompt_update=info.get("systemPromptUpdate"),
            tool_update=info.get("toolUpdate"),
            _run=lambda options: self._run(options, adapter),
        )

    # -- streaming ------------------------------------------------------------------------

    def stream(self, options: dict[str, Any]) -> AsyncIterator[StreamChunk]:
        """Run ``llm/stream`` for ``options`` and normalise the chunks.

        Never raises but cancellation and ``InvariantError`` (a companion's verdict is no model failure).
        """
        return self._run(options, None)

    def _dispatch(self, options: dict[str, Any], adapter: LlmAdapter | None) -> AsyncIterator[StreamChunk]:
        """The waterfall default: the bound (or routed) adapter's ``stream`` on gated options."""
        if adapter is None:
            adapter = self.adapter_for(options["provider"])
        if self._projections:
            return self._projected(options, adapter)
        stream: AsyncIterator[StreamChunk] = adapter.stream(self.gate_replay_state(options, adapter))
        return stream

    async def _projected(self, options: dict[str, Any], adapter: LlmAdapter) -> AsyncIterator[StreamChunk]:
        """The adapter's stream on ``options`` as every projection rewrote them."""
        for projection in list(self._projections):
            options = await projection(options)
        stream = adapter.stream(self.gate_replay_state(options, adapter))
        try:
            async for chunk in stream:
                yield chunk
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                await _quietly(closer)

    def gate_replay_state(self, options: dict[str, Any], adapter: LlmAdapter) -> dict[str, Any]:
        """A copy of ``options`` whose assistant messages lose replay state another adapter produced."""
        messages = options.get("messages")
        if not messages:
            return options
        session = options.get("sessionId")
        key = (session, id(adapter)) if session else None
        kept = self._gated.resume(key, messages) if key is not None else None
        start = 0 if kept is None else kept[0]
        out: list[dict[str, Any]] | None = None
        for index in range(start, len(messages)):
            message = messages[index]
            if self._foreign_state(message, adapter):
                out = list(messages) if out is None else out
                source = message["source"]
                out[index] = {**message, "source": {k: v for k, v in source.items() if k != "replayState"}}
        if out is not None:
            return {**options, "messages": out}
        if key is not None and (end := frozen_run(messages, start)) > start:
            self._gated.store(key, messages[:end], None)
        return options

    def _foreign_state(self, message: dict[str, Any], adapter: LlmAdapter) -> bool:
        """An assistant message carrying replay state of a provider ``adapter`` does not serve."""
        source = message.get("source")
        return (
            message.get("role") == "assistant"
            and isinstance(source, dict)
            and "replayState" in source
            and self._routes.get(str(source.get("provider"))) is not adapter
        )

    async def _run(self, options: dict[str, Any], adapter: LlmAdapter | None) -> AsyncIterator[StreamChunk]:
        signal: AbortSignal = options.get("signal") or NEVER
        index_of: dict[int, int] = {}
        source: AsyncIterator[StreamChunk] | None = None
        finish: StreamChunk | None = None
        try:
            signal.throw_if_aborted()
            source = await self.ctx.waterfall(LLM_STREAM, options, lambda: self._dispatch(options, adapter))
            if source is None:
                raise no_adapter(str(options.get("provider")))
            async for raw in source:
                chunk = raw
                ctype = chunk.get("type") if isinstance(chunk, dict) else None
                if ctype not in CHUNK_KEYS:
                    raise LlmError(f"adapter produced an unknown stream chunk {ctype!r}", "MALFORMED_RESPONSE")
                if ctype == "finish":
                    finish = settle(chunk, bool(index_of))
                    break
                if "index" in chunk:
                    index = chunk["index"]
                    mapped = index_of.setdefault(index, len(index_of))
                    if mapped != index:
                        chunk = {**chunk, "index": mapped}
                yield chunk
            if finish is None:
                finish = settle({"type": "finish", "reason": {"kind": "stop"}}, bool(index_of))
        except (LlmError, AbortError) as exc:
            finish = failure_finish(exc, signal)
        except InvariantError:
            raise
        except Exception as exc:
            log.warning("model stream failed: %s", exc, exc_info=True)
            finish = failure_finish(exc, signal)
        finally:
            closer = getattr(source, "aclose", None)
            if closer is not None:
                await _quietly(closer)
        yield finish


def materialise(config: dict[str, Any], info: ModelInfo) -> tuple[dict[str, Any], dict[str, bool]]:
    """Fill the model's defaults into ``config`` (spec 04 §3.3); refuses efforts the model lacks."""
    provider, model = config["provider"], config["model"]
    resolved = {k: v for k, v in config.items() if v is not None}
    reasoning = info.get("reasoning")
    effort = resolved.get("reasoningEffort")
    if effort is not None:
        ids = [e["id"] for e in reasoning["efforts"]] if reasoning else []
        if effort not in ids:
            raise unsupported_effort(provider, model, effort)
    defaults: dict[str, bool] = {}
    fill_effort = effort is None and reasoning is not None and reasoning.get("defaultEffort") is not None
    fill_max = "maxTokens" not in resolved and info.get("defaultMaxTokens") is not None
    if fill_max:
        resolved["maxTokens"] = info["defaultMaxTokens"]
    if fill_effort and reasoning is not None:
        resolved["reasoningEffort"] = reasoning["defaultEffort"]
        defaults["reasoningEffort"] = True
    if fill_max:
        defaults["maxTokens"] = True
    return resolved, defaults


def settle(chunk: StreamChunk, saw_blocks: bool) -> StreamChunk:
    """The terminal chunk: a ``stop`` after zero blocks becomes ``EMPTY_RESPONSE``."""
    reason = chunk.get("reason")
    if not isinstance(reason, dict) or reason.get("kind") not in (
        "stop",
        "tool-calls",
        "max-tokens",
        "error",
        "aborted",
    ):
        raise LlmError("adapter produced a finish chunk without a known reason", "MALFORMED_RESPONSE")
    if reason["kind"] in ("error", "aborted") and not isinstance(reason.get("failure"), dict):
        raise LlmError("adapter produced a failure finish without a failure", "MALFORMED_RESPONSE")
    if reason["kind"] == "stop" and not saw_blocks:
        return error_finish({"message": EMPTY_MESSAGE, "code": "EMPTY_RESPONSE"})
    return chunk


def error_finish(failure: dict[str, Any]) -> StreamChunk:
    return {"type": "finish", "reason": {"kind": "error", "failure": failure}}


def failure_finish(exc: BaseException, signal: AbortSignal) -> StreamChunk:
    """The terminal chunk of a raised exception (spec 04 §3.4 rule 3)."""
    if isinstance(exc, LlmError):
        failure: dict[str, Any] = dict(exc.failure())
    elif isinstance(exc, AbortError):
        failure = {"message": "request aborted", "code": "ABORTED"}
    else:
        code = "TRANSPORT" if type(exc).__module__.split(".")[0] in ("httpx", "httpcore") else "UNKNOWN"
        failure = {"message": str(exc) or type(exc).__name__, "code": code}
    if signal.aborted or failure["code"] == "ABORTED":
        if failure["code"] != "ABORTED":
            failure = {"message": "request aborted", "code": "ABORTED"}
        return {"type": "finish", "reason": {"kind": "aborted", "failure": failure}}
    return error_finish(failure)


async def _quietly(closer: Callable[[], Awaitable[Any]]) -> None:
    try:
        await closer()
    except Exception:
        log.debug("closing a model stream failed", exc_info=True)


name = "llm"


def apply(ctx: Context, config: None) -> None:
    """Provide the ``llm`` service."""
    ctx.provide(LLM, LlmService(ctx))
