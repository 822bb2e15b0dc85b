"""Keyless model adapters: cassette replay and in-code scripts (spec 04 §8).

A script is a list of entries, one per model call. :class:`ReplayAdapter` derives scripts from
recorded v4 session logs (primary plus child cassettes, an optional override sidecar);
:class:`ScriptedAdapter` compiles compact in-code entries. Both bind live sessions to scripts in
first-call order and can serve routes through the ``llm`` registry or a catch-all ``llm/stream``
listener.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydsh.kernel.cancel import NEVER, AbortSignal
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.llm.hooks import LLM_STREAM
from pydsh.llm.keys import LLM, LLM_REPLAY
from pydsh.llm.retry import RetryPolicyConfig
from pydsh.llm.stream_records import check_chunk, expand_assistant_stream
from pydsh.llm.types import LlmError, ModelInfo, ProviderInfo, StreamChunk

COMPACT_KEYS = frozenset({"text", "reasoning", "tool_calls", "error", "throw", "hang", "chunks", "stop", "usage"})
_FROM_REQUEST = "{{fromRequest:"
_ANONYMOUS = object()


def replay_error(message: str) -> LlmError:
    """A loud replay failure (a script and the run disagree)."""
    return LlmError(message, "REPLAY_MISMATCH")


# -- entries ---------------------------------------------------------------------------------


def entry_problem(entry: object) -> str | None:
    """What is wrong with a canonical ``chunks`` / ``throw`` / ``hang`` entry, or ``None``."""
    if not isinstance(entry, dict):
        return "entry is not an object"
    kind = entry.get("kind")
    allowed = {
        "chunks": ({"kind", "chunks"}, set()),
        "throw": ({"kind", "message", "code"}, {"chunks", "status", "providerRetryAfterMs"}),
        "hang": ({"kind"}, {"readyFile"}),
    }.get(kind if isinstance(kind, str) else "")
    if allowed is None:
        return f"entry kind {kind!r} is not chunks, throw or hang"
    required, optional = allowed
    keys = set(entry)
    if not required <= keys or not keys <= required | optional:
        return f"{kind} entry must have keys {sorted(required)} (optional {sorted(optional)})"
    if kind == "throw" and not (isinstance(entry["message"], str) and isinstance(entry["code"], str)):
        return "throw entry needs string message and code"
    if kind == "hang" and not isinstance(entry.get("readyFile", ""), str):
        return "hang readyFile is not a string"
    chunks = entry.get("chunks", [])
    if not isinstance(chunks, list):
        return "chunks is not a list"
    for i, chunk in enumerate(chunks):
        try:
            check_chunk(chunk, f"chunks[{i}]")
        except TypeError as exc:
            return str(exc)
    if kind == "chunks" and (not chunks or chunks[-1].get("type") != "finish"):
        return "chunks entry does not end with a finish chunk"
    return None


def _pieces(text: str, size: int | None) -> list[str]:
    if not size or len(text) <= size:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def compile_entry(
    entry: dict[str, Any], number: int, *, input_chars: int = 0, chunk_size: int | None = None
) -> dict[str, Any]:
    """The canonical entry of a compact scripted entry (spec 04 §8.4); canonical entries pass through."""
    if "kind" in entry:
        problem = entry_problem(entry)
        if problem:
            raise ValueError(problem)
        return entry
    unknown = set(entry) - COMPACT_KEYS
    if unknown:
        raise ValueError(f"unknown scripted entry keys {sorted(unknown)}")
    if "chunks" in entry:
        canonical = {"kind": "chunks", "chunks": entry["chunks"]}
        problem = entry_problem(canonical)
        if problem:
            raise ValueError(problem)
        return canonical
    if "hang" in entry:
        hang = entry["hang"]
        return {"kind": "hang", "readyFile": hang["readyFile"]} if isinstance(hang, dict) else {"kind": "hang"}
    chunks, output_chars, has_calls = _block_chunks(entry, number, chunk_size)
    if "throw" in entry:
        return _failure_entry(entry["throw"], chunks)
    if "error" in entry:
        failure = _failure(entry["error"])
        return {
            "kind": "chunks",
            "chunks": [*chunks, {"type": "finish", "reason": {"kind": "error", "failure": failure}}],
        }
    usage = entry.get("usage")
    if usage is None:
        inp, out = math.ceil(input_chars / 4), math.ceil(output_chars / 4)
        usage = {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out}
    stop = entry.get("stop") or ("tool-calls" if has_calls else "stop")
    if stop not in ("stop", "tool-calls", "max-tokens"):
        raise ValueError(f"scripted stop {stop!r} is not stop, tool-calls or max-tokens")
    chunks += [{"type": "usage", "usage": usage}, {"type": "finish", "reason": {"kind": stop}}]
    return {"kind": "chunks", "chunks": chunks}


def _block_chunks(entry: dict[str, Any], number: int, size: int | None) -> tuple[list[StreamChunk], int, bool]:
    chunks: list[StreamChunk] = []
    chars = 0
    index = 0
    for kind, delta_type in (("reasoning", "reasoning-delta"), ("text", "text-delta")):
        text = entry.get(kind)
        if text is None:
            continue
        if not isinstance(text, str):
            raise ValueError(f"scripted {kind} is not a string")
        chunks.append({"type": "block-start", "index": index, "blockType": kind})
        chunks += [{"type": delta_type, "index": index, "text": piece} for piece in _pieces(text, size)]
        chunks.append({"type": "block-end", "index": index, "block": {"type": kind, "text": text}})
        chars += len(text)
        index += 1
    calls = entry.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ValueError("scripted tool_calls is not a list")
    for n, call in enumerate(calls, 1):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError("a scripted tool call needs a name")
        args = call.get("arguments", {})
        arguments = args if isinstance(args, str) else json.dumps(args, separators=(",", ":"), ensure_ascii=False)
        call_id = call.get("id") or f"call-{number}-{n}"
        chunks.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        for i, piece in enumerate(_pieces(arguments, size)):
            delta: StreamChunk = {"type": "tool-call-delta", "index": index, "id": call_id}
            if i == 0:
                delta["name"] = call["name"]
            delta["argumentsDelta"] = piece
            chunks.append(delta)
        block = {"type": "tool-call", "id": call_id, "name": call["name"], "arguments": arguments}
        chunks.append({"type": "block-end", "index": index, "block": block})
        chars += len(arguments)
        index += 1
    return chunks, chars, bool(calls)


def _failure(spec: object) -> dict[str, Any]:
    if not isinstance(spec, dict) or not isinstance(spec.get("code"), str) or not isinstance(spec.get("message"), str):
        raise ValueError("a scripted error needs string code and message")
    unknown = set(spec) - {"code", "message", "status", "providerRetryAfterMs", "requestId"}
    if unknown:
        raise ValueError(f"unknown scripted error keys {sorted(unknown)}")
    return {
        "message": spec["message"],
        "code": spec["code"],
        **{k: v for k, v in spec.items() if k not in ("code", "message")},
    }


def _failure_entry(spec: object, chunks: list[StreamChunk]) -> dict[str, Any]:
    failure = _failure(spec)
    failure.pop("requestId", None)
    return {"kind": "throw", "chunks": chunks, **failure}


# -- {{fromRequest:<regex>}} -----------------------------------------------------------------


def request_corpus(options: dict[str, Any]) -> str:
    """Every string leaf of ``options.messages``, joined with newlines."""
    leaves: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            leaves.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(options.get("messages") or [])
    return "\n".join(leaves)


def fill_from_request(value: Any, corpus: Callable[[], str]) -> Any:
    """``value`` with every ``{{fromRequest:<regex>}}`` replaced by the regex's last match in the request."""
    if isinstance(value, str):
        return _fill(value, corpus) if _FROM_REQUEST in value else value
    if isinstance(value, dict):
        return {k: fill_from_request(v, corpus) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_from_request(v, corpus) for v in value]
    return value


def _closing(text: str, start: int) -> int | None:
    """End of the first run of two or more ``}`` at or after ``start``."""
    i = start
    while True:
        j = text.find("}", i)
        if j < 0:
            return None
        k = j
        while k < len(text) and text[k] == "}":
            k += 1
        if k - j >= 2:
            return k
        i = k


def _fill(text: str, corpus: Callable[[], str]) -> str:
    out: list[str] = []
    pos = 0
    while (start := text.find(_FROM_REQUEST, pos)) >= 0:
        out.append(text[pos:start])
        body = start + len(_FROM_REQUEST)
        end = _closing(text, body)
        if end is None:
            raise replay_error(f"llm-replay: fromRequest placeholder is not terminated: {text[start : start + 80]!r}")
        pattern = text[body : end - 2]
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise replay_error(f"llm-replay: fromRequest pattern {pattern!r} is invalid: {exc}") from None
        match = None
        for found in regex.finditer(corpus()):
            match = found
        if match is None:
            raise replay_error(f"llm-replay: fromRequest pattern {pattern!r} matched nothing in the request")
        out.append((match.group(1) or "") if regex.groups else match.group(0))
        pos = end
    out.append(text[pos:])
    return "".join(out)


# -- playback --------------------------------------------------------------------------------


def _aborted() -> LlmError:
    return LlmError("scripted model call aborted", "ABORTED")


async def play(entry: dict[str, Any], options: dict[str, Any], pace_ms: int = 0) -> AsyncIterator[StreamChunk]:
    """Yield a canonical (already filled) entry's chunks for one call, honouring abort between chunks."""
    signal: AbortSignal = options.get("signal") or NEVER
    for chunk in entry.get("chunks", ()):
        if signal.aborted:
            raise _aborted()
        if pace_ms:
            await _pause(pace_ms / 1000, signal)
        yield chunk
    kind = entry["kind"]
    if kind == "throw":
        raise LlmError(
            entry["message"],
            entry["code"],
            status=entry.get("status"),
            provider_retry_after_ms=entry.get("providerRetryAfterMs"),
        )
    if kind == "hang":
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": "partial"}
        if entry.get("readyFile"):
            Path(entry["readyFile"]).touch()
        await signal.wait()
        raise _aborted()


async def _pause(seconds: float, signal: AbortSignal) -> None:
    try:
        async with signal.scope():
            await asyncio.sleep(seconds)
    except Exception:
        raise _aborted() from None


# -- binding sessions to scripts -------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One scripted model call; ``purpose`` marks recorded compaction calls."""

    entry: dict[str, Any]
    purpose: str | None = None


ProviderCatalog = list[dict[str, Any]]


class ScriptAdapter:
    """Serves calls from scripts bound to sessions in first-call order (spec 04 §8.6)."""

    def __init__(
        self,
        scripts: list[list[Call]],
        *,
        providers: ProviderCatalog | None = None,
        title: str | None = None,
        pace_ms: int = 0,
        chunk_size: int | None = None,
    ) -> None:
        self.scripts = scripts
        self.title = title
        self.pace_ms = pace_ms
        self.chunk_size = chunk_size
        self._bound: dict[object, int] = {}
        self._cursors = [0] * len(scripts)
        self._providers = {p["id"]: p for p in providers or []}

    # -- adapter protocol -------------------------------------------------------------------

    def provider_info(self, provider: str) -> ProviderInfo:
        entry = self._providers.get(provider) or {}
        return {"id": provider, "name": entry.get("name") or provider}

    def provider_retry_policy(self, provider: str) -> dict[str, Any] | None:
        policy = (self._providers.get(provider) or {}).get("retryPolicy")
        return dict(policy) if policy is not None else None

    async def list_models(self, provider: str) -> list[ModelInfo]:
        models = (self._providers.get(provider) or {}).get("models") or []
        return [_model_info(provider, m) for m in models]

    async def resolve_model(self, provider: str, model: str) -> ModelInfo:
        for entry in (self._providers.get(provider) or {}).get("models") or []:
            if entry["id"] == model:
                return _model_info(provider, entry)
        return {"provider": provider, "id": model, "name": model}

    def stream(self, options: dict[str, Any]) -> AsyncIterator[StreamChunk]:
        """The next entry of the calling session's script (title calls answered aside)."""
        purpose = options.get("purpose")
        if purpose == "session-title":
            if self.title is None:
                raise replay_error("llm-replay: a session-title call arrived but no provider title was recorded")
            entry = compile_entry({"text": self.title}, 0)
            return play(entry, options)
        call = self._next(options.get("sessionId") or _ANONYMOUS, purpose)
        cache: list[str] = []

        def corpus() -> str:
            if not cache:
                cache.append(request_corpus(options))
            return cache[0]

        entry = fill_from_request(call.entry, corpus)
        if "kind" not in entry:
            number = self._number(options)
            entry = compile_entry(entry, number, input_chars=len(corpus()), chunk_size=self.chunk_size)
        return play(entry, options, self.pace_ms)

    async def aclose(self) -> None:
        return None

    # -- binding ----------------------------------------------------------------------------

    def _number(self, options: dict[str, Any]) -> int:
        script = self._bound.get(options.get("sessionId") or _ANONYMOUS, 0)
        return self._cursors[script]

    def _next(self, key: object, purpose: object) -> Call:
        script = self._bound.get(key)
        if script is None:
            if len(self._bound) >= len(self.scripts):
                raise replay_error(
                    f"llm-replay: a model call arrived from an unrecorded session (#{len(self._bound) + 1}); "
                    f"the scenario recorded only {len(self.scripts)} session(s)"
                )
            script = self._bound[key] = len(self._bound)
        calls, cursor = self.scripts[script], self._cursors[script]
        if cursor >= len(calls):
            raise replay_error(
                f"llm-replay: script exhausted — session requested model call #{cursor + 1} "
                f"but its script has only {len(calls)}"
            )
        call = calls[cursor]
        if purpose == "compaction" and call.purpose != "compaction":
            raise replay_error(
                f"llm-replay: a compaction call arrived but model call #{cursor + 1} was not recorded as one"
            )
        if purpose != "compaction" and call.purpose == "compaction":
            raise replay_error(
                f"llm-replay: model call #{cursor + 1} was recorded as a compaction call, "
                "but a conversation call arrived"
            )
        self._cursors[script] = cursor + 1
        return call

    def assert_consumed(self) -> None:
        """Fail unless every script was bound and fully consumed (test teardown, MUST)."""
        problems = []
        bound = set(self._bound.values())
        for i, calls in enumerate(self.scripts):
            if i not in bound:
                problems.append(f"script {i + 1} was never bound to a session")
            elif self._cursors[i] < len(calls):
                problems.append(f"script {i + 1} consumed {self._cursors[i]} of {len(calls)} model calls")
        if problems:
            raise AssertionError("llm-replay: fixture not fully consumed — " + "; ".join(problems))


def _model_info(provider: str, entry: dict[str, Any]) -> ModelInfo:
    info: ModelInfo = {"provider": provider, "id": entry["id"], "name": entry.get("name") or entry["id"]}
    if entry.get("contextWindow") is not None:
        info["context"] = {"contextWindow": entry["contextWindow"]}
    if entry.get("defaultMaxTokens") is not None:
        info["defaultMaxTokens"] = entry["defaultMaxTokens"]
    if entry.get("inputModalities"):
        info["inputModalities"] = list(entry["inputModalities"])
    efforts = entry.get("reasoningEfforts")
    if efforts:
        info["reasoning"] = {"efforts": [{"id": e, "name": e} for e in efforts]}
        if entry.get("defaultReasoningEffort") is not None:
            info["reasoning"]["defaultEffort"] = entry["defaultReasoningEffort"]
    return info


class ScriptedAdapter(ScriptAdapter):
    """In-code scripts of compact entries (one list, or one list per session)."""

    def __init__(
        self,
        scripts: list[Any],
        *,
        providers: ProviderCatalog | None = None,
        title: str | None = None,
        pace_ms: int = 0,
        chunk_size: int | None = None,
    ) -> None:
        lists = scripts if scripts and all(isinstance(s, list) for s in scripts) else [scripts]
        compiled: list[list[Call]] = []
        for s, script in enumerate(lists, 1):
            calls = []
            for n, raw in enumerate(script, 1):
                if not isinstance(raw, dict):
                    raise ValueError(f"llm-replay: script {s} entry {n} is not an object")
                purpose = raw.get("purpose")
                if purpose not in (None, "compaction"):
                    raise ValueError(f'llm-replay: script {s} entry {n}: purpose must be "compaction"')
                entry = {k: v for k, v in raw.items() if k != "purpose"}
                try:
                    compile_entry(entry, n, chunk_size=chunk_size)
                except (ValueError, KeyError, TypeError) as exc:
                    raise ValueError(f"llm-replay: script {s} entry {n}: {exc}") from None
                calls.append(Call(entry, purpose))
            compiled.append(calls)
        super().__init__(compiled, providers=providers, title=title, pace_ms=pace_ms, chunk_size=chunk_size)


# -- cassettes -------------------------------------------------------------------------------


@dataclass
class Cassette:
    """One recorded session: its header, derived calls and last provider title."""

    path: str
    header: dict[str, Any]
    calls: list[Call]
    title: str | None


def load_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Parse and validate a v4 session log and derive its model calls (spec 04 §8.2)."""
    from pydsh.session.errors import SessionError
    from pydsh.session.log import Session

    name = str(path)
    try:
        lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        rows = [json.loads(line) for line in lines]
    except (OSError, ValueError) as exc:
        raise ValueError(f"llm-replay: cannot read cassette {name}: {exc}") from None
    if not rows or not isinstance(rows[0], dict):
        raise ValueError(f"llm-replay: cassette {name} has no header")
    header, events = rows[0], rows[1:]
    complete = [isinstance(e, dict) and "seq" in e and "time" in e for e in events]
    if any(complete) and not all(complete):
        raise ValueError(f"llm-replay: cassette {name} mixes projected and complete rows")
    if not all(complete):
        created = header.get("createdAt")
        base = created if isinstance(created, int) else 0
        events = [_complete(e, seq, base) for seq, e in enumerate(events)]
    try:
        Session(header, events)
    except (SessionError, ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"llm-replay: invalid cassette {name}: {exc}") from None
    calls = derive_calls(events)
    title = None
    for event in events:
        data = event["data"]
        source = data.get("source") if event["type"] == "session/title" else None
        if isinstance(source, dict) and source.get("kind") == "provider":
            title = data.get("title")
    return Cassette(name, header, calls, title)


def _complete(row: object, seq: int, base: int) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ValueError(f"llm-replay: row {seq + 1} is not an object")
    event = {"type": row.get("type"), "seq": seq, "time": base + seq, "data": row.get("data")}
    for key in ("ignorable", "sourceEventSeqs", "surfaceOp"):
        if key in row:
            event[key] = row[key]
    return event


def derive_calls(events: list[dict[str, Any]]) -> list[Call]:
    """Model calls in log order: messages, failed attempts, aborted attempts and compaction calls."""
    calls: list[Call] = []
    for event in events:
        etype, data = event["type"], event["data"]
        number = len(calls) + 1
        if etype == "assistant/message" and data.get("interrupted"):
            calls.append(Call({"kind": "hang"}))
        elif etype in ("assistant/message", "assistant/attempt"):
            try:
                chunks = [chunk for _time, chunk in expand_assistant_stream(data.get("stream"))]
            except TypeError as exc:
                raise ValueError(f"llm-replay: model call {number} has an invalid stream: {exc}") from None
            if not chunks or chunks[-1]["type"] != "finish":
                raise ValueError(f"llm-replay: model call {number} ended without a finish chunk")
            kind = chunks[-1]["reason"]["kind"]
            calls.append(Call({"kind": "hang"}) if kind == "aborted" else Call({"kind": "chunks", "chunks": chunks}))
        elif etype == "compaction/summary" and data.get("llmStreamCall"):
            calls.append(Call(_compaction_entry(data, number), "compaction"))
    return calls


def _compaction_entry(data: dict[str, Any], number: int) -> dict[str, Any]:
    raw = data.get("rawOutput")
    if not isinstance(raw, list):
        raise ValueError(f"llm-replay: model call {number} is a compaction stream call without rawOutput")
    chunks: list[StreamChunk] = []
    for i, block in enumerate(raw):
        if not isinstance(block, dict) or block.get("type") not in ("text", "reasoning", "tool-call"):
            raise ValueError(f"llm-replay: model call {number} has an unsupported rawOutput block")
        chunks.append({"type": "block-start", "index": i, "blockType": block["type"]})
        chunks.append({"type": "block-end", "index": i, "block": block})
    if isinstance(data.get("usage"), dict):
        chunks.append({"type": "usage", "usage": data["usage"]})
    chunks.append({"type": "finish", "reason": {"kind": "stop"}})
    return {"kind": "chunks", "chunks": chunks}


def apply_override(calls: list[Call], path: str | os.PathLike[str]) -> list[Call]:
    """The primary script after the override sidecar (spec 04 §8.3)."""
    name = str(path)

    def bad(location: str, detail: str) -> ValueError:
        return ValueError(f"llm-replay: invalid override {name}: {location} {detail}")

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise bad("(file)", str(exc)) from None

    def checked(entry: object, location: str, number: int) -> Call:
        if not isinstance(entry, dict):
            raise bad(location, "is not an object")
        try:
            compile_entry(entry, number)
        except (ValueError, KeyError, TypeError) as exc:
            raise bad(location, str(exc)) from None
        return Call(entry)

    if isinstance(doc, list):
        return [checked(e, f"[{i}]", i + 1) for i, e in enumerate(doc)]
    if not isinstance(doc, dict) or set(doc) != {"patches"} or not isinstance(doc["patches"], list):
        raise bad("(root)", 'is neither an entry list nor {"patches": [...]}')
    out = list(calls)
    seen: set[int] = set()
    for i, patch in enumerate(doc["patches"]):
        where = f"patches[{i}]"
        if not isinstance(patch, dict) or set(patch) != {"at", "entry"}:
            raise bad(where, 'must have exactly "at" and "entry"')
        at = patch["at"]
        if type(at) is not int or at < 0:
            raise bad(f"{where}.at", "is not a non-negative integer")
        if at in seen:
            raise bad(f"{where}.at", f"duplicates call index {at}")
        seen.add(at)
        call = checked(patch["entry"], f"{where}.entry", at + 1)
        if at < len(out):
            out[at] = call
        elif at == len(out):
            out.append(call)
        else:
            raise bad(f"{where}.at", f"is beyond the script's end ({len(out)})")
    return out


class ReplayAdapter(ScriptAdapter):
    """Replays recorded session logs: the primary cassette plus child cassettes (spec 04 §8.2–§8.6)."""

    def __init__(
        self,
        file: str | os.PathLike[str],
        *,
        override_file: str | os.PathLike[str] | None = None,
        child_files: list[str] | None = None,
        providers: ProviderCatalog | None = None,
        pace_ms: int = 0,
    ) -> None:
        primary = load_cassette(file)
        if override_file:
            primary.calls = apply_override(primary.calls, override_file)
        cassettes = [primary, *(load_cassette(f) for f in child_files or [])]
        ordered = sorted(enumerate(cassettes), key=lambda pair: (pair[1].header["createdAt"], pair[0]))
        super().__init__(
            [c.calls for _i, c in ordered],
            providers=providers,
            title=primary.title,
            pace_ms=pace_ms,
        )


# -- plugin ----------------------------------------------------------------------------------


class ModelConfig(BaseModel):
    """A model served by the replay route."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str | None = None
    contextWindow: int | None = Field(default=None, gt=0)
    defaultMaxTokens: int | None = Field(default=None, gt=0)
    reasoningEfforts: list[str] | None = None
    defaultReasoningEffort: str | None = None
    inputModalities: list[Literal["text", "image"]] | None = None


class ProviderConfig(BaseModel):
    """A route the replay adapter registers under, with its catalog and retry policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str | None = None
    retryPolicy: RetryPolicyConfig | None = None
    models: list[ModelConfig] = Field(default_factory=list)


class Config(BaseModel):
    """``llm-replay`` configuration (spec 04 §8.7)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str | None = None
    overrideFile: str | None = None
    childFiles: list[str] | None = None
    scripts: list[Any] | None = None
    providers: list[ProviderConfig] | None = None
    paceMs: int = Field(default=0, ge=0)


def _catalog(config: Config) -> ProviderCatalog | None:
    if config.providers is None:
        return None
    out = []
    for p in config.providers:
        entry = p.model_dump(exclude_none=True)
        entry["retryPolicy"] = p.retryPolicy.policy() if p.retryPolicy is not None else None
        out.append(entry)
    return out


def build_adapter(config: Config) -> ScriptAdapter:
    """The adapter a config describes (env defaults for the cassette paths)."""
    providers = _catalog(config)
    if config.scripts is not None:
        if config.file is not None:
            raise ValueError("llm-replay: give either file or scripts, not both")
        return ScriptedAdapter(config.scripts, providers=providers, pace_ms=config.paceMs)
    file = config.file or os.environ.get("DSH_SNAPSHOT_FILE")
    if not file:
        raise ValueError("llm-replay: no cassette: set file (or DSH_SNAPSHOT_FILE) or scripts")
    override = config.overrideFile or os.environ.get("DSH_SNAPSHOT_OVERRIDE") or None
    children = config.childFiles
    if children is None:
        children = [p for p in os.environ.get("DSH_SNAPSHOT_CHILD_FILES", "").split(os.pathsep) if p]
    return ReplayAdapter(file, override_file=override, child_files=children, providers=providers, pace_ms=config.paceMs)


name = "llm-replay"
inject = (LLM,)


def apply(ctx: Context, config: Config) -> None:
    """Serve the configured routes (or every route through a catch-all ``llm/stream`` listener)."""
    adapter = build_adapter(config)
    ctx.provide(LLM_REPLAY, adapter)
    if config.providers:
        ctx.require(LLM).register_adapter(ctx, [p.id for p in config.providers], adapter)
        return

    async def serve_every_route(options: dict[str, Any], next: Callable[[], Any]) -> AsyncIterator[StreamChunk]:
        return adapter.stream(options)

    ctx.on(LLM_STREAM, serve_every_route, name="llm-replay")
