"""OpenAI-compatible chat-completions routes: DeepSeek's OpenAI endpoint and local servers (spec 04 §5).

One adapter instance serves every configured route (``deepseek-openai`` and, when
``OPENAI_BASE_URL`` is set, ``openai-compat`` by default). ``dialect: deepseek`` adds DeepSeek's
thinking controls and round-trips ``reasoning_content``; ``generic`` sends plain chat requests.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from pydsh.kernel.cancel import NEVER, AbortSignal
from pydsh.kernel.config import BaseModel, ConfigDict, Field, field_validator
from pydsh.kernel.context import Context
from pydsh.llm import http
from pydsh.llm.deepseek import EFFORTS
from pydsh.llm.keys import LLM, LLM_TRANSPORT
from pydsh.llm.prefix import PrefixCache, convert, whole
from pydsh.llm.retry import RetryPolicyConfig
from pydsh.llm.sse import drain, sse_events
from pydsh.llm.types import LlmError, ModelInfo, ProviderInfo, StreamChunk

if TYPE_CHECKING:
    import httpx

PREFIX = "chat completions"
STOPS = {"stop": "stop", "tool_calls": "tool-calls", "length": "max-tokens"}
DEEPSEEK_EFFORTS = frozenset({"off", "low", "high", "max"})


class ModelEntry(BaseModel):
    """A catalog model of one route."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str | None = None
    contextWindow: int | None = Field(default=None, gt=0)
    maxTokens: int | None = Field(default=None, gt=0)
    inputModalities: list[Literal["text", "image"]] = Field(default_factory=lambda: ["text"], min_length=1)


class ReasoningConfig(BaseModel):
    """Efforts a generic server accepts as ``reasoning_effort``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    efforts: list[str] = Field(min_length=1)
    defaultEffort: str | None = None


class ProviderConfig(BaseModel):
    """One chat-completions route."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str | None = None
    baseURL: str
    apiKeyEnv: str | None = None
    dialect: Literal["deepseek", "generic"] = "generic"
    models: list[ModelEntry] = Field(default_factory=list)
    maxTokens: int | None = Field(default=None, gt=0)
    defaultContextWindow: int = Field(default=131072, gt=0)
    reasoning: ReasoningConfig | None = None
    includeUsage: bool = True
    streamIdleTimeoutMs: int = Field(default=300000, gt=0)
    connectTimeoutMs: int = Field(default=30000, gt=0)
    retryPolicy: RetryPolicyConfig | None = None
    attributionHeaders: bool = True

    @field_validator("baseURL")
    @classmethod
    def _base(cls, value: str) -> str:
        return http.check_base_url(value)


class Config(BaseModel):
    """``llm-openai-compat`` configuration: the routes (default: the shipped ones)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    providers: list[ProviderConfig] | None = None


def shipped_providers() -> list[ProviderConfig]:
    """``deepseek-openai`` always; ``openai-compat`` when ``OPENAI_BASE_URL`` is set."""
    routes = [
        ProviderConfig(
            id="deepseek-openai",
            name="DeepSeek (OpenAI API)",
            baseURL="https://api.deepseek.com",
            apiKeyEnv="DEEPSEEK_API_KEY",
            dialect="deepseek",
        )
    ]
    base = os.environ.get("OPENAI_BASE_URL", "").strip()
    if base:
        key_env = "OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY", "").strip() else None
        routes.append(ProviderConfig(id="openai-compat", name="OpenAI-compatible", baseURL=base, apiKeyEnv=key_env))
    return routes


def _unsupported(what: str) -> LlmError:
    return LlmError(f"{PREFIX} does not support {what}", "UNSUPPORTED_CONTENT")


def _joined(message: dict[str, Any], kinds: tuple[str, ...], role: str) -> str:
    parts = []
    for block in message.get("content") or []:
        btype = block.get("type")
        if btype in kinds:
            parts.append(block["text"])
        elif btype not in ("text", "reasoning", "tool-call", "tool-addition", "tool-removal"):
            raise _unsupported(f"{btype} content in {role} messages")
    return "\n\n".join(p for p in parts if p)


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A user message with images as chat content parts: its texts, and each image as a ``data:`` URL."""
    parts: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        if block.get("type") == "text" and block["text"]:
            parts.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "image":
            url = f"data:{block['attachment']['mediaType']};base64,{block['data']}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


class ChatHistory:
    """Chat messages of the harness history (spec 04 §5.3), built message by message."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.out: list[dict[str, Any]] = []
        self.encoded: list[str] = []
        """The JSON of each wire message."""
        self.system: str | None = None

    def fork(self) -> ChatHistory:
        """A copy to go on adding to (the wire messages built so far are shared, never changed)."""
        twin = copy.copy(self)
        twin.out = list(self.out)
        twin.encoded = list(self.encoded)
        return twin

    def append(self, message: dict[str, Any]) -> None:
        self.out.append(message)
        self.encoded.append(http.compact_json(message))

    def add(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        if role == "system":
            self.system = _joined(message, ("text",), "system")
        elif role == "developer":
            text = _joined(message, ("text",), "developer")
            if text:
                self.append({"role": "system", "content": text})
        elif role == "user":
            if any(b.get("type") == "image" and "data" in b for b in message.get("content") or ()):
                self.append({"role": "user", "content": _parts(message)})
                return
            text = _joined(message, ("text",), "user")
            if text:
                self.append({"role": "user", "content": text})
        elif role == "assistant":
            self.append(_assistant(message, self.dialect))
        elif role == "tool":
            text = _joined(message, ("text",), "tool")
            self.append({"role": "tool", "tool_call_id": message["toolCallId"], "content": text or "(no output)"})
        else:
            raise _unsupported(f"{role} messages")

    def finish(self, system: str | None) -> http.Encoded:
        """The wire messages with their JSON, led by the request's and the history's system text when there is any."""
        system_text = "\n\n".join(s for s in (system, self.system) if s)
        if not system_text:
            return http.Encoded(self.out, "[" + ",".join(self.encoded) + "]")
        lead = {"role": "system", "content": system_text}
        return http.Encoded([lead, *self.out], "[" + ",".join([http.compact_json(lead), *self.encoded]) + "]")


def _functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
        }
        for t in tools
    ]


def _assistant(message: dict[str, Any], dialect: str) -> dict[str, Any]:
    blocks = message.get("content") or []
    wire: dict[str, Any] = {"role": "assistant", "content": _joined(message, ("text",), "assistant")}
    if dialect == "deepseek" and any(b.get("type") == "reasoning" for b in blocks):
        wire["reasoning_content"] = "".join(b["text"] for b in blocks if b.get("type") == "reasoning")
    calls = [
        {"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": b["arguments"]}}
        for b in blocks
        if b.get("type") == "tool-call"
    ]
    if calls:
        wire["tool_calls"] = calls
    return wire


class ChatTranslator:
    """Turns chat-completions SSE payloads into harness chunks (spec 04 §5.4, §5.5)."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.reasoning: int | None = None
        self.text: int | None = None
        self.tools: dict[int, int] = {}
        self.ids: dict[int, str] = {}
        self.names: dict[int, str] = {}
        self.content: dict[int, list[str]] = {}
        self.reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False

    def _open(self, kind: str) -> tuple[int, list[StreamChunk]]:
        index = len(self.kinds)
        self.kinds.append(kind)
        self.content[index] = []
        return index, [{"type": "block-start", "index": index, "blockType": kind}]

    def feed(self, data: str) -> list[StreamChunk]:
        """Chunks for one ``data:`` payload (block ends, usage and finish only at ``[DONE]``)."""
        if data == "[DONE]":
            self.done = True
            return self.settle()
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise LlmError(f"malformed SSE payload: {data[:120]}", "MALFORMED_RESPONSE")
        if isinstance(doc.get("error"), dict):
            raise http.chat_error(None, http.error_fields(json.dumps({"error": doc["error"]})))
        choices = doc.get("choices", [])
        if not isinstance(choices, list):
            raise LlmError(f"{PREFIX} stream: choices is not a list", "MALFORMED_RESPONSE")
        if isinstance(doc.get("usage"), dict):
            self.usage = doc["usage"]
        out: list[StreamChunk] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise LlmError(f"{PREFIX} stream: a choice is not an object", "MALFORMED_RESPONSE")
            delta = choice.get("delta")
            if isinstance(delta, dict):
                out += self._delta(delta)
            if choice.get("finish_reason"):
                self.reason = str(choice["finish_reason"])
        return out

    def _delta(self, delta: dict[str, Any]) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            if self.reasoning is None:
                self.reasoning, start = self._open("reasoning")
                out += start
            self.content[self.reasoning].append(reasoning)
            out.append({"type": "reasoning-delta", "index": self.reasoning, "text": reasoning})
        text = delta.get("content")
        if isinstance(text, str) and text:
            if self.text is None:
                self.text, start = self._open("text")
                out += start
            self.content[self.text].append(text)
            out.append({"type": "text-delta", "index": self.text, "text": text})
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                if isinstance(call, dict):
                    out += self._tool(call, position)
        return out

    def _tool(self, call: dict[str, Any], position: int) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        raw_index = call.get("index")
        wire = raw_index if isinstance(raw_index, int) else position
        index = self.tools.get(wire)
        if index is None:
            index, start = self._open("tool-call")
            self.tools[wire] = index
            out += start
        if isinstance(call.get("id"), str) and call["id"]:
            self.ids[index] = call["id"]
        raw_fn = call.get("function")
        fn: dict[str, Any] = raw_fn if isinstance(raw_fn, dict) else {}
        raw_args = fn.get("arguments")
        args = raw_args if isinstance(raw_args, str) else ""
        chunk: StreamChunk = {"type": "tool-call-delta", "index": index, "id": self.ids.get(index, "")}
        if isinstance(fn.get("name"), str) and fn["name"]:
            self.names[index] = fn["name"]
            chunk["name"] = fn["name"]
        chunk["argumentsDelta"] = args
        self.content[index].append(args)
        out.append(chunk)
        return out

    def settle(self) -> list[StreamChunk]:
        """Block ends in block order, then usage, then finish."""
        out: list[StreamChunk] = []
        for index, kind in enumerate(self.kinds):
            joined = "".join(self.content[index])
            if kind == "tool-call":
                call_id = self.ids.get(index) or f"call_{index}"
                block = {"type": "tool-call", "id": call_id, "name": self.names.get(index, ""), "arguments": joined}
            else:
                block = {"type": kind, "text": joined}
            out.append({"type": "block-end", "index": index, "block": block})
        if self.usage is not None:
            out.append({"type": "usage", "usage": map_usage(self.usage)})
        reason = self.reason or "stop"
        if reason in STOPS:
            if STOPS[reason] == "stop" and not self.kinds:
                raise LlmError("model returned a completed response with no content", "EMPTY_RESPONSE")
            out.append({"type": "finish", "reason": {"kind": STOPS[reason]}})
        else:
            failure = {"message": f"model stopped: {reason}", "code": reason.upper()}
            out.append({"type": "finish", "reason": {"kind": "error", "failure": failure}})
        return out


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def map_usage(raw: dict[str, Any]) -> dict[str, int]:
    """Harness usage of a chat ``usage`` object (disjoint counts)."""
    raw_details = raw.get("prompt_tokens_details")
    details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    cached = _count(details.get("cached_tokens"))
    if cached is None:
        cached = _count(raw.get("prompt_cache_hit_tokens"))
    prompt = _count(raw.get("prompt_tokens")) or 0
    out = {"inputTokens": prompt - (cached or 0), "outputTokens": _count(raw.get("completion_tokens")) or 0}
    if cached is not None:
        out["cacheReadTokens"] = cached
    completion = raw.get("completion_tokens_details")
    reasoning = _count(completion.get("reasoning_tokens")) if isinstance(completion, dict) else None
    if reasoning is not None:
        out["reasoningTokens"] = reasoning
    out["totalTokens"] = out["inputTokens"] + out["outputTokens"] + (cached or 0)
    return out


class OpenAICompatAdapter:
    """Chat-completions adapter serving every configured route with one HTTP pool."""

    def __init__(self, providers: list[ProviderConfig], *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.providers = {p.id: p for p in providers}
        self.transport = transport
        self.prefixes: PrefixCache[ChatHistory] = PrefixCache()
        self.tool_lists: PrefixCache[http.Encoded] = PrefixCache()
        self.clients = http.Clients(self._make_client)
        self._user_id: str | None = None

    def route(self, provider: str) -> ProviderConfig:
        config = self.providers.get(provider)
        if config is None:
            raise LlmError(f'no adapter registered for provider "{provider}"', "NO_ADAPTER")
        return config

    def provider_info(self, provider: str) -> ProviderInfo:
        return {"id": provider, "name": self.route(provider).name or provider}

    def provider_retry_policy(self, provider: str) -> dict[str, Any]:
        return (self.route(provider).retryPolicy or RetryPolicyConfig()).policy()

    async def list_models(self, provider: str) -> list[ModelInfo]:
        return [await self.resolve_model(provider, m.id) for m in self.route(provider).models]

    async def resolve_model(self, provider: str, model: str) -> ModelInfo:
        config = self.route(provider)
        entry = next((m for m in config.models if m.id == model), None)
        info: ModelInfo = {"provider": provider, "id": model, "name": (entry and entry.name) or model}
        info["inputModalities"] = list(entry.inputModalities) if entry is not None else ["text"]
        info["context"] = {"contextWindow": (entry and entry.contextWindow) or config.defaultContextWindow}
        max_tokens = (entry and entry.maxTokens) or config.maxTokens
        if max_tokens:
            info["defaultMaxTokens"] = max_tokens
        if config.dialect == "deepseek":
            info["reasoning"] = {"efforts": [dict(e) for e in EFFORTS], "defaultEffort": "high"}  # type: ignore[misc]
        elif config.reasoning is not None:
            efforts = [{"id": e, "name": e} for e in config.reasoning.efforts]
            info["reasoning"] = {"efforts": efforts}  # type: ignore[typeddict-item]
            if config.reasoning.defaultEffort:
                info["reasoning"]["defaultEffort"] = config.reasoning.defaultEffort
        return info

    def wire_messages(self, options: dict[str, Any], dialect: str) -> http.Encoded:
        """The request's chat messages, resumed from the session's converted prefix when it has one."""
        session = options.get("sessionId")
        key = (session, dialect) if session else None
        history = convert(self.prefixes, key, ChatHistory(dialect), options.get("messages") or [])
        return history.finish(options.get("system"))

    def build_body(self, options: dict[str, Any], config: ProviderConfig) -> dict[str, Any]:
        """The request body in the key order of spec 04 §5.2."""
        body: dict[str, Any] = {"model": options["model"], "messages": self.wire_messages(options, config.dialect)}
        body["stream"] = True
        if config.includeUsage:
            body["stream_options"] = {"include_usage": True}
        effort = options.get("reasoningEffort")
        if config.dialect == "deepseek" and effort is not None:
            if effort not in DEEPSEEK_EFFORTS:
                raise LlmError(f'DeepSeek does not support reasoning effort "{effort}"', "UNSUPPORTED_REASONING_EFFORT")
            body["thinking"] = {"type": "disabled" if effort == "off" else "enabled"}
            if effort != "off":
                body["reasoning_effort"] = effort
        elif effort is not None and config.reasoning is not None:
            body["reasoning_effort"] = effort
        tools = options.get("tools")
        if tools:
            body["tools"] = whole(
                self.tool_lists, options.get("sessionId"), tools, lambda: http.encoded(_functions(tools))
            )
        if options.get("temperature") is not None:
            body["temperature"] = options["temperature"]
        if options.get("maxTokens"):
            body["max_tokens"] = options["maxTokens"]
        if options.get("stop"):
            body["stop"] = list(options["stop"])
        return body

    def headers(self, options: dict[str, Any], config: ProviderConfig) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream", "user-agent": http.USER_AGENT}
        key = http.api_key(config.id, config.apiKeyEnv, required=config.apiKeyEnv is not None)
        if key:
            headers["authorization"] = f"Bearer {key}"
        if config.dialect == "deepseek":
            if config.attributionHeaders and self._user_id is None:
                self._user_id = http.anonymous_user_id()
            headers.update(http.harness_headers(options, self._user_id if config.attributionHeaders else None))
        return headers

    async def stream(self, options: dict[str, Any]) -> AsyncIterator[StreamChunk]:
        """One provider attempt on the route named by ``options.provider``."""
        import httpx

        signal: AbortSignal = options.get("signal") or NEVER
        config = self.route(options["provider"])
        body = self.build_body(options, config)
        headers = self.headers(options, config)
        client = self.clients.get(options.get("sessionId"))
        timeout = httpx.Timeout(
            connect=config.connectTimeoutMs / 1000, read=config.streamIdleTimeoutMs / 1000, write=30.0, pool=30.0
        )
        url = config.baseURL.rstrip("/") + "/chat/completions"
        content = http.encode_body(body)
        request = client.build_request("POST", http.parsed_url(url), content=content, headers=headers, timeout=timeout)
        async with http.opened(client, request, signal, PREFIX, http.chat_error) as response:
            translator = ChatTranslator()
            events = sse_events(response, signal, PREFIX)
            async for _name, data in events:
                chunks = translator.feed(data)
                if translator.done:
                    await drain(events)
                for chunk in chunks:
                    yield chunk
                if translator.done:
                    return
            raise LlmError("SSE stream ended without [DONE]", "STREAM_CLOSED")

    async def aclose(self) -> None:
        """Close the connection pools."""
        await self.clients.aclose()

    def _make_client(self) -> httpx.AsyncClient:
        """A pool for every route: the timeouts given per request override its own (the first route's)."""
        first = next(iter(self.providers.values()))
        urls = [p.baseURL for p in self.providers.values()]
        return http.make_client(first.connectTimeoutMs, first.streamIdleTimeoutMs, urls, self.transport)


name = "llm-openai-compat"
inject = (LLM,)
optional = (LLM_TRANSPORT,)


def apply(ctx: Context, config: Config) -> None:
    """Register every configured chat-completions route on one adapter."""
    providers = config.providers if config.providers is not None else shipped_providers()
    adapter = OpenAICompatAdapter(providers, transport=ctx.get(LLM_TRANSPORT))
    ctx.register(adapter.aclose)
    if providers:
        ctx.require(LLM).register_adapter(ctx, [p.id for p in providers], adapter)
