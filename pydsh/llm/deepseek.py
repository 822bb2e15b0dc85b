"""The ``deepseek-official`` route: DeepSeek's Anthropic-Messages endpoint over httpx (spec 04 §4).

Requests are built from the harness history (merged same-role messages, tool results first,
thinking signatures replayed only to the model that produced them) and validated before any
I/O; the SSE response is translated into harness stream chunks by :class:`MessagesTranslator`.
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
from pydsh.llm.keys import LLM, LLM_TRANSPORT
from pydsh.llm.prefix import PrefixCache, convert, whole
from pydsh.llm.replay import ReplayReader
from pydsh.llm.retry import RetryPolicyConfig
from pydsh.llm.sse import drain, sse_events, typed_event
from pydsh.llm.types import LlmError, ModelInfo, ProviderInfo, StreamChunk

if TYPE_CHECKING:
    import httpx

ROUTE = "deepseek-official"
PREFIX = "DeepSeek Messages"
DEFAULT_BASE_URL = "https://api.deepseek.com/anthropic"
EFFORTS = (
    {"id": "off", "name": "Off", "description": "Use for simple tasks that do not need reasoning."},
    {"id": "low", "name": "Low", "description": "Prefer for routine or latency-sensitive tasks."},
    {"id": "high", "name": "High", "description": "The default balance for most tasks."},
    {"id": "max", "name": "Max", "description": "Reserve for the hardest quality-first tasks."},
)
EFFORT_IDS = frozenset(e["id"] for e in EFFORTS)
REPLAY_KIND = "deepseek-messages"
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool-calls", "max_tokens": "max-tokens"}
USAGE_FIELDS = (
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("cache_read_input_tokens", "cacheReadTokens"),
    ("cache_creation_input_tokens", "cacheWriteTokens"),
)


class ModelEntry(BaseModel):
    """One catalog model of the route."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str | None = None
    description: str | None = None
    contextWindow: int | None = Field(default=None, gt=0)
    maxTokens: int | None = Field(default=None, gt=0)
    systemPromptUpdate: Literal["in-history"] | None = None
    toolUpdate: Literal["in-history", "addition-only"] | None = None
    inputModalities: list[Literal["text", "image"]] = Field(default_factory=lambda: ["text"], min_length=1)


SHIPPED_MODELS = (
    ModelEntry(id="deepseek-v4-flash", name="DeepSeek-V4-Flash"),
    ModelEntry(id="deepseek-v4-pro", name="DeepSeek-V4-Pro"),
    ModelEntry(
        id="deepseek-flash",
        name="DeepSeek-V4.1-Flash",
        systemPromptUpdate="in-history",
        toolUpdate="addition-only",
        inputModalities=["text", "image"],
    ),
)


class Config(BaseModel):
    """``llm-deepseek`` configuration (spec 04 §4.1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    baseURL: str | None = None
    apiKeyEnv: str = "DEEPSEEK_API_KEY"
    thinking: Literal["disabled"] | None = None
    reasoningEffort: Literal["off", "low", "high", "max"] | None = None
    maxTokens: int = Field(default=256000, gt=0)
    defaultContextWindow: int = Field(default=1000000, gt=0)
    models: list[ModelEntry] | None = None
    streamIdleTimeoutMs: int = Field(default=300000, gt=0)
    connectTimeoutMs: int = Field(default=30000, gt=0)
    retryPolicy: RetryPolicyConfig | None = None
    attributionHeaders: bool = True

    @field_validator("baseURL")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        return http.check_base_url(value) if value is not None else None


def messages_url(base_url: str) -> str:
    """``<root>/messages`` where the root gains ``/v1`` unless the path already ends in it."""
    base = base_url.rstrip("/")
    root = base if base.endswith("/v1") else base + "/v1"
    return root + "/messages"


def _unsupported(what: str) -> LlmError:
    return LlmError(f"{PREFIX} does not support {what}", "UNSUPPORTED_CONTENT")


def _invalid(message: str) -> LlmError:
    return LlmError(f"{PREFIX} {message}", "INVALID_REQUEST")


# -- request ---------------------------------------------------------------------------------


def _text_of(message: dict[str, Any], role: str) -> str:
    parts = []
    for block in message.get("content") or []:
        if block.get("type") != "text":
            raise _unsupported(f"{block.get('type')} content in {role} messages")
        parts.append(block["text"])
    return "\n\n".join(p for p in parts if p)


class MessagesRequest:
    """Serialises harness history into Messages wire messages (spec 04 §4.4)."""

    def __init__(self, model: str, info: ModelInfo, reader: ReplayReader) -> None:
        self.model = model
        self.in_history = info.get("systemPromptUpdate") == "in-history"
        self.reader = reader
        self.wire: list[dict[str, Any]] = []
        self.sealed: list[dict[str, Any]] = []
        """The final form of every wire message but the last (which the next part may still extend)."""
        self.encoded: list[str] = []
        """The JSON of each sealed message."""
        self.pairing = ToolPairing()
        self.system: str | None = None
        self.pending: list[dict[str, Any]] = []
        self.tool_changes = False

    def fork(self) -> MessagesRequest:
        """A copy to go on adding to: it shares every wire message but the last, the only one ``push`` extends."""
        twin = copy.copy(self)
        twin.wire = list(self.wire)
        if twin.wire:
            last = twin.wire[-1]
            twin.wire[-1] = {"role": last["role"], "content": list(last["content"])}
        twin.sealed = list(self.sealed)
        twin.encoded = list(self.encoded)
        twin.pairing = copy.copy(self.pairing)
        twin.pending = list(self.pending)
        return twin

    def push(self, role: str, parts: list[dict[str, Any]]) -> None:
        if self.wire and self.wire[-1]["role"] == role:
            self.wire[-1]["content"].extend(parts)
            return
        if self.wire:
            self.seal(self.wire[-1])
        self.wire.append({"role": role, "content": list(parts)})

    def seal(self, message: dict[str, Any]) -> None:
        """Settle a wire message nothing extends any more: its final form, its JSON, its tool pairing."""
        final = _results_first(message) if message["role"] == "user" else message
        self.sealed.append(final)
        self.encoded.append(http.compact_json(final))
        self.pairing.feed(final)

    def flush_developer(self) -> None:
        if not self.pending:
            return
        if not self.wire or self.wire[-1]["role"] != "user":
            raise _unsupported("a developer update that does not follow a user message")
        parts, self.pending = self.pending, []
        self.push("system", parts)

    def add(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        if role == "system":
            text = _text_of(message, "system")
            if self.in_history and self.wire:
                if not text:
                    raise _unsupported("an empty in-history system update")
                self.push("system", [{"type": "text", "text": text}])
            else:
                self.system = text
        elif role == "developer":
            self.pending.extend(self._developer_parts(message))
        elif role == "user":
            parts = self._user_parts(message)
            if parts:
                self.push("user", parts)
        elif role == "assistant":
            self.flush_developer()
            parts = self._assistant_parts(message)
            if parts:
                self.push("assistant", parts)
        elif role == "tool":
            self.push("user", [self._tool_result(message)])
        else:
            raise _unsupported(f"{role} messages")

    def _developer_parts(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        for block in message.get("content") or []:
            btype = block.get("type")
            if btype == "text":
                if block["text"]:
                    parts.append({"type": "text", "text": block["text"]})
            elif btype in ("tool-addition", "tool-removal"):
                self.tool_changes = True
                kind = "tool_addition" if btype == "tool-addition" else "tool_removal"
                parts.append({"type": kind, "tool": {"type": "tool_reference", "name": block["toolName"]}})
            else:
                raise _unsupported(f"{btype} content in developer messages")
        return parts

    @staticmethod
    def _user_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
        parts = []
        for block in message.get("content") or []:
            btype = block.get("type")
            if btype == "text":
                if block["text"]:
                    parts.append({"type": "text", "text": block["text"]})
            elif btype == "image" and "data" in block:
                parts.append(_image(block))
            elif btype not in ("reasoning", "tool-call"):
                raise _unsupported(f"{btype} content in user messages")
        return parts

    def _assistant_parts(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        replay = self.reader.read(message, str((message.get("source") or {}).get("provider")))
        signatures: list[Any] = replay[1] if replay is not None and replay[0] == self.model else []
        parts: list[dict[str, Any]] = []
        for i, block in enumerate(message.get("content") or []):
            btype = block.get("type")
            if btype == "reasoning":
                part = {"type": "thinking", "thinking": block["text"]}
                if signatures and "signature" in signatures[i]:
                    part["signature"] = signatures[i]["signature"]
                parts.append(part)
            elif btype == "text":
                if block["text"]:
                    parts.append({"type": "text", "text": block["text"]})
            elif btype == "tool-call":
                parts.append({"type": "tool_use", "id": block["id"], "name": block["name"], "input": _input(block)})
            else:
                raise _unsupported(f"{btype} content in assistant messages")
        return parts

    @staticmethod
    def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
        content = []
        for block in message.get("content") or []:
            if block.get("type") == "image" and "data" in block:
                content.append(_image(block))
                continue
            if block.get("type") != "text":
                raise _unsupported(f"{block.get('type')} content in tool results")
            if block["text"]:
                content.append({"type": "text", "text": block["text"]})
        part: dict[str, Any] = {"type": "tool_result", "tool_use_id": message["toolCallId"], "content": content}
        if message.get("isError") is not None:
            part["is_error"] = bool(message["isError"])
        return part

    def finish(self) -> http.Encoded:
        """The wire messages, tool results first in every user message, validated (spec 04 §4.5), with their
        JSON; the wire messages already built stay as they are (a fork of this request may share them)."""
        self.flush_developer()
        if not self.wire:
            return http.Encoded([], "[]")
        last = self.wire[-1]
        final = _results_first(last) if last["role"] == "user" else last
        pairing = copy.copy(self.pairing)
        pairing.feed(final)
        pairing.end()
        return http.Encoded([*self.sealed, final], "[" + ",".join([*self.encoded, http.compact_json(final)]) + "]")


def _image(block: dict[str, Any]) -> dict[str, Any]:
    """An image whose bytes the request's image projection supplied, as a base64 source."""
    source = {"type": "base64", "media_type": block["attachment"]["mediaType"], "data": block["data"]}
    return {"type": "image", "source": source}


def _results_first(message: dict[str, Any]) -> dict[str, Any]:
    """A user wire message with its tool results moved to the front (itself when they already are)."""
    content = message["content"]
    ordered = [p for p in content if p["type"] == "tool_result"] + [p for p in content if p["type"] != "tool_result"]
    return message if ordered == content else {"role": "user", "content": ordered}


def _input(block: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(block.get("arguments") or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class ToolPairing:
    """Every tool call answered in the very next user message, every result matched (``INVALID_REQUEST``),
    checked message by message; the first problem is kept and raised by ``end``, so the conversion's own
    errors of later messages still come first."""

    __slots__ = ("pending", "problem")

    def __init__(self) -> None:
        self.pending: frozenset[str] = frozenset()
        self.problem: str | None = None

    def feed(self, message: dict[str, Any]) -> None:
        if self.problem is None:
            self.problem = self._check(message)

    def _check(self, message: dict[str, Any]) -> str | None:
        pending = self.pending
        if message["role"] == "assistant":
            if pending:
                return "tool calls need immediate results"
            ids = [p["id"] for p in message["content"] if p["type"] == "tool_use"]
            if len(set(ids)) != len(ids):
                return "duplicate tool call id"
            self.pending = frozenset(ids)
        elif message["role"] == "user":
            answered = [p["tool_use_id"] for p in message["content"] if p["type"] == "tool_result"]
            for call_id in answered:
                if call_id not in pending:
                    return "tool result has no matching call"
                pending = pending - {call_id}
            if pending:
                return "tool calls need immediate results"
            self.pending = pending
        elif pending:
            return "tool calls need immediate results"
        return None

    def end(self) -> None:
        if self.problem is None and self.pending:
            self.problem = "history ends with unresolved tools"
        if self.problem is not None:
            raise _invalid(self.problem)


# -- response --------------------------------------------------------------------------------


def _malformed(detail: str) -> LlmError:
    return LlmError(f"{PREFIX} stream: {detail}", "MALFORMED_RESPONSE")


class _Block:
    """One response block as it streams; text arrives in pieces joined once at the end (appending each delta
    to a string copied the whole text every time: a 5 MB answer in 1 KB deltas cost seconds of CPU)."""

    __slots__ = ("index", "kind", "pieces", "id", "name", "input", "json", "signature")

    def __init__(self, index: int, kind: str) -> None:
        self.index = index
        self.kind = kind
        self.pieces: list[str] = []
        self.id = ""
        self.name = ""
        self.input: Any = None
        self.json: list[str] | None = None
        self.signature: str | None = None

    def assembled(self) -> dict[str, Any]:
        if self.kind == "tool-call":
            args = "".join(self.json) if self.json is not None else _js_json(self.input)
            return {"type": "tool-call", "id": self.id, "name": self.name, "arguments": args}
        return {"type": self.kind, "text": "".join(self.pieces)}


_TEXT_BLOCKS = {"text": ("text", "text"), "thinking": ("reasoning", "thinking")}
"""Response block type → the harness block kind and the field holding its opening text."""


def _js_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class MessagesTranslator:
    """Turns Messages SSE events into harness chunks (spec 04 §4.7–§4.10)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = False
        self.done = False
        self.open: dict[int, _Block] = {}
        self.seen: set[int] = set()
        self.blocks: list[_Block] = []
        self.reason: str | None = None
        self.usage: dict[str, int] = {"inputTokens": 0, "outputTokens": 0}

    def feed(self, event: dict[str, Any]) -> list[StreamChunk]:
        """Chunks for one event (usage and finish only at ``message_stop``)."""
        etype = event["type"]
        if etype == "error":
            error = event.get("error")
            fields = http.error_fields(json.dumps({"error": error})) if isinstance(error, dict) else (None, None, None)
            raise http.messages_error(None, fields)
        handler = _HANDLERS.get(etype)
        if handler is None:
            return []
        if etype == "message_start":
            if self.started:
                raise _malformed("duplicate message_start")
        elif not self.started:
            raise _malformed("event precedes message_start")
        return handler(self, event)

    def _usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        for wire, harness in USAGE_FIELDS:
            if wire in usage and usage[wire] is not None:
                value = usage[wire]
                if type(value) is not int or value < 0:
                    raise _malformed(f"invalid {wire}")
                self.usage[harness] = value

    def _message_start(self, event: dict[str, Any]) -> list[StreamChunk]:
        message = event.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
            raise _malformed("message_start without usage")
        self.started = True
        self._usage(message["usage"])
        served = message.get("model")
        if isinstance(served, str) and served:
            self.model = served
        return []

    def _block_start(self, event: dict[str, Any]) -> list[StreamChunk]:
        index, block = event.get("index"), event.get("content_block")
        if type(index) is not int or index < 0 or not isinstance(block, dict):
            raise _malformed("content_block_start needs an index and a content_block")
        if index in self.seen or self.reason is not None:
            raise _malformed("block starts after settlement or repeats an index")
        btype = block.get("type")
        n = len(self.blocks)
        chunks: list[StreamChunk]
        if btype in _TEXT_BLOCKS:
            kind, field = _TEXT_BLOCKS[btype]
            entry = _Block(n, kind)
            text = block.get(field) or ""
            if not isinstance(text, str):
                raise _malformed(f"{btype} block with non-string {field}")
            if kind == "reasoning" and isinstance(block.get("signature"), str):
                entry.signature = block["signature"]
            chunks = [{"type": "block-start", "index": n, "blockType": kind}]
            if text:
                entry.pieces.append(text)
                chunks.append({"type": f"{kind}-delta", "index": n, "text": text})
        elif btype == "tool_use":
            entry = _Block(n, "tool-call")
            ident, tool, entry.input = block.get("id"), block.get("name"), block.get("input", {})
            if not isinstance(ident, str) or not isinstance(tool, str) or not ident or not tool:
                raise _malformed("empty tool identity")
            entry.id, entry.name = ident, tool
            if not isinstance(entry.input, dict):
                raise _malformed("tool_use input is not an object")
            chunks = [
                {"type": "block-start", "index": n, "blockType": "tool-call"},
                {"type": "tool-call-delta", "index": n, "id": entry.id, "name": entry.name, "argumentsDelta": ""},
            ]
        else:
            raise _unsupported(f"response block {btype}")
        self.seen.add(index)
        self.open[index] = entry
        self.blocks.append(entry)
        return chunks

    def _block_delta(self, event: dict[str, Any]) -> list[StreamChunk]:
        entry = self.open.get(event.get("index"))  # type: ignore[arg-type]
        delta = event.get("delta")
        if entry is None:
            raise _malformed("delta/stop without an open block")
        dtype = delta.get("type") if isinstance(delta, dict) else None
        if not isinstance(delta, dict):
            raise _malformed("content_block_delta without delta")
        n = entry.index
        if dtype == "text_delta" and entry.kind == "text" and isinstance(delta.get("text"), str):
            entry.pieces.append(delta["text"])
            return [{"type": "text-delta", "index": n, "text": delta["text"]}]
        if dtype == "thinking_delta" and entry.kind == "reasoning" and isinstance(delta.get("thinking"), str):
            entry.pieces.append(delta["thinking"])
            return [{"type": "reasoning-delta", "index": n, "text": delta["thinking"]}]
        if dtype == "signature_delta" and entry.kind == "reasoning" and isinstance(delta.get("signature"), str):
            entry.signature = (entry.signature or "") + delta["signature"]
            return []
        if dtype == "input_json_delta" and entry.kind == "tool-call" and isinstance(delta.get("partial_json"), str):
            if entry.json is None:
                entry.json = []
            entry.json.append(delta["partial_json"])
            return [{"type": "tool-call-delta", "index": n, "id": entry.id, "argumentsDelta": delta["partial_json"]}]
        raise _malformed(f"unsupported delta {dtype} for {entry.kind}")

    def _block_stop(self, event: dict[str, Any]) -> list[StreamChunk]:
        entry = self.open.pop(event.get("index"), None)  # type: ignore[arg-type]
        if entry is None:
            raise _malformed("delta/stop without an open block")
        return [{"type": "block-end", "index": entry.index, "block": entry.assembled()}]

    def _message_delta(self, event: dict[str, Any]) -> list[StreamChunk]:
        delta = event.get("delta")
        if not isinstance(delta, dict):
            raise _malformed("message_delta without delta")
        stop = delta.get("stop_reason")
        if stop is not None:
            if stop not in STOP_REASONS:
                raise _malformed(f"unsupported stop reason {stop}")
            self.reason = STOP_REASONS[stop]
        self._usage(event.get("usage"))
        return []

    def _message_stop(self, event: dict[str, Any]) -> list[StreamChunk]:
        if self.reason is None or self.open:
            raise _malformed("message_stop without settled blocks and stop reason")
        if not self.blocks and self.reason == "stop":
            raise LlmError(f"{PREFIX} returned no content", "EMPTY_RESPONSE")
        if self.reason != "max-tokens":
            for entry in self.blocks:
                if entry.kind == "tool-call" and not _is_object_json(entry.assembled()["arguments"]):
                    raise _malformed("tool input is invalid JSON")
        self.done = True
        return [{"type": "usage", "usage": self.final_usage()}, self.finish_chunk()]

    def final_usage(self) -> dict[str, int]:
        u = self.usage
        out = {"inputTokens": u["inputTokens"], "outputTokens": u["outputTokens"]}
        for key in ("cacheReadTokens", "cacheWriteTokens"):
            if key in u:
                out[key] = u[key]
        out["totalTokens"] = sum(out.values())
        return out

    def finish_chunk(self) -> StreamChunk:
        blocks = []
        for entry in self.blocks:
            item: dict[str, Any] = {"type": entry.kind}
            if entry.kind == "reasoning" and entry.signature is not None:
                item["signature"] = entry.signature
            blocks.append(item)
        state = {"response": {"kind": REPLAY_KIND, "version": 1, "model": self.model}, "blocks": blocks}
        return {"type": "finish", "reason": {"kind": self.reason}, "replayState": state}


def _is_object_json(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


_HANDLERS = {
    "message_start": MessagesTranslator._message_start,
    "content_block_start": MessagesTranslator._block_start,
    "content_block_delta": MessagesTranslator._block_delta,
    "content_block_stop": MessagesTranslator._block_stop,
    "message_delta": MessagesTranslator._message_delta,
    "message_stop": MessagesTranslator._message_stop,
}


# -- adapter ---------------------------------------------------------------------------------


class DeepSeekAdapter:
    """The Anthropic-Messages adapter: one pooled HTTP client per instance."""

    def __init__(
        self,
        config: Config,
        *,
        route: str = ROUTE,
        base_url: str | None = None,
        base_url_env: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.transport = transport
        self.route = route
        self.base_url = base_url or config.baseURL or DEFAULT_BASE_URL
        self.base_url_env = base_url_env
        """The environment variable the base URL came from, if it did (Settings says so)."""
        self.url = messages_url(self.base_url)
        self.catalog = {m.id: m for m in (config.models if config.models is not None else SHIPPED_MODELS)}
        self.reader = ReplayReader(REPLAY_KIND, 1)
        self.prefixes: PrefixCache[MessagesRequest] = PrefixCache()
        self.tool_lists: PrefixCache[http.Encoded] = PrefixCache()
        self.clients = http.Clients(self._make_client)
        self._user_id: str | None = None

    # -- catalog ------------------------------------------------------------------------------

    def provider_info(self, provider: str) -> ProviderInfo:
        return {"id": provider, "name": "DeepSeek"}

    def provider_retry_policy(self, provider: str) -> dict[str, Any]:
        return (self.config.retryPolicy or RetryPolicyConfig()).policy()

    def _efforts(self) -> dict[str, Any]:
        if self.config.thinking == "disabled":
            return {"efforts": [dict(EFFORTS[0])], "defaultEffort": "off"}
        return {"efforts": [dict(e) for e in EFFORTS], "defaultEffort": self.config.reasoningEffort or "high"}

    async def list_models(self, provider: str) -> list[ModelInfo]:
        return [await self.resolve_model(provider, model) for model in self.catalog]

    async def resolve_model(self, provider: str, model: str) -> ModelInfo:
        entry = self.catalog.get(model)
        info: ModelInfo = {"provider": provider, "id": model, "name": (entry and entry.name) or model}
        if entry is not None and entry.description:
            info["description"] = entry.description
        info["inputModalities"] = list(entry.inputModalities) if entry is not None else ["text"]
        info["context"] = {"contextWindow": (entry and entry.contextWindow) or self.config.defaultContextWindow}
        info["defaultMaxTokens"] = (entry and entry.maxTokens) or self.config.maxTokens
        info["reasoning"] = self._efforts()  # type: ignore[typeddict-item]
        if entry is not None and entry.systemPromptUpdate:
            info["systemPromptUpdate"] = entry.systemPromptUpdate
        if entry is not None and entry.toolUpdate:
            info["toolUpdate"] = entry.toolUpdate
        return info

    # -- request ------------------------------------------------------------------------------

    def effort(self, options: dict[str, Any]) -> str:
        """The effective effort (options → config → default), validated."""
        disabled = self.config.thinking == "disabled"
        effort = options.get("reasoningEffort") or self.config.reasoningEffort or ("off" if disabled else "high")
        if effort not in EFFORT_IDS or (disabled and effort != "off"):
            raise LlmError(f"{PREFIX} does not support reasoning effort {effort}", "UNSUPPORTED_REASONING_EFFORT")
        return str(effort)

    async def build_body(self, options: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The request body (key order of spec 04 §4.3) and whether it carries tool changes."""
        model = options["model"]
        info = await self.resolve_model(self.route, model)
        fresh = MessagesRequest(model, info, self.reader)
        session = options.get("sessionId")
        key = (session, model, fresh.in_history) if session else None
        request = convert(self.prefixes, key, fresh, options.get("messages") or [])
        wire = request.finish()
        effort = self.effort(options)
        entry = self.catalog.get(model)
        body: dict[str, Any] = {"model": model, "stream": True, "messages": wire}
        body["max_tokens"] = options.get("maxTokens") or (entry and entry.maxTokens) or self.config.maxTokens
        body["thinking"] = {"type": "disabled"} if effort == "off" else {"type": "enabled"}
        if effort != "off":
            body["output_config"] = {"effort": effort}
        system = "\n\n".join(s for s in (options.get("system"), request.system) if s)
        if system:
            body["system"] = system
        if options.get("temperature") is not None:
            body["temperature"] = options["temperature"]
        if options.get("stop"):
            body["stop_sequences"] = list(options["stop"])
        tools = options.get("tools")
        if tools:
            body["tools"] = whole(self.tool_lists, session, tools, lambda: http.encoded([_wire_tool(t) for t in tools]))
        return body, request.tool_changes

    def headers(self, options: dict[str, Any], key: str, tool_changes: bool) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "x-api-key": key,
            "anthropic-version": "2023-06-01",
            "user-agent": http.USER_AGENT,
        }
        if self.config.attributionHeaders and self._user_id is None:
            self._user_id = http.anonymous_user_id()
        headers.update(http.harness_headers(options, self._user_id if self.config.attributionHeaders else None))
        if tool_changes:
            headers["anthropic-beta"] = "mid-conversation-tool-changes-2026-07-01"
        return headers

    def _make_client(self) -> httpx.AsyncClient:
        config = self.config
        return http.make_client(config.connectTimeoutMs, config.streamIdleTimeoutMs, [self.url], self.transport)

    async def stream(self, options: dict[str, Any]) -> AsyncIterator[StreamChunk]:
        """One provider attempt: validate, send, translate; failures raise ``LlmError``."""
        signal: AbortSignal = options.get("signal") or NEVER
        body, tool_changes = await self.build_body(options)
        key = http.api_key(self.route, self.config.apiKeyEnv, required=True)
        assert key is not None
        client = self.clients.get(options.get("sessionId"))
        request = client.build_request(
            "POST",
            http.parsed_url(self.url),
            content=http.encode_body(body),
            headers=self.headers(options, key, tool_changes),
        )
        async with http.opened(client, request, signal, PREFIX, http.messages_error) as response:
            translator = MessagesTranslator(options["model"])
            events = sse_events(response, signal, PREFIX)
            async for name, data in events:
                chunks = translator.feed(typed_event(name, data, PREFIX))
                if translator.done:
                    await drain(events)
                for chunk in chunks:
                    yield chunk
                if translator.done:
                    return
            raise LlmError(f"{PREFIX} stream ended before message_stop", "STREAM_CLOSED")

    async def aclose(self) -> None:
        """Close the connection pools."""
        await self.clients.aclose()


def _wire_tool(tool: dict[str, Any]) -> dict[str, Any]:
    out = {"name": tool["name"], "description": tool["description"], "input_schema": tool["parameters"]}
    if tool.get("deferLoading"):
        out["defer_loading"] = True
    return out


name = "llm-deepseek"
inject = (LLM,)
optional = (LLM_TRANSPORT,)


def apply(ctx: Context, config: Config) -> None:
    """Register the ``deepseek-official`` route; the HTTP pool closes when the plugin unloads."""
    from_env = None if config.baseURL else os.environ.get("DEEPSEEK_BASE_URL", "").strip() or None
    base = config.baseURL or from_env or DEFAULT_BASE_URL
    transport = ctx.get(LLM_TRANSPORT)
    env = "DEEPSEEK_BASE_URL" if from_env else None
    adapter = DeepSeekAdapter(config, base_url=http.check_base_url(base), base_url_env=env, transport=transport)
    ctx.register(adapter.aclose)
    ctx.require(LLM).register_adapter(ctx, [ROUTE], adapter)
