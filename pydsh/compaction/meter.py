"""The ``token_meter`` service and its projection units, on the host plane (spec 10 §2).

``measure`` prices the current surface with the fixed heuristic and anchors it to the
provider's reported usage when the request header is unchanged since that usage was sampled.
The units ``tokenUsage``, ``contextPressure`` and ``contextBreakdown`` are registered once per
process, so every session is metered the same way whatever preset its agent joined.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydsh.compaction.heuristic import estimate_message, price_blocks, price_event, tools_tokens
from pydsh.compaction.keys import TOKEN_METER
from pydsh.kernel.config import BaseModel, ConfigDict, model_validator
from pydsh.kernel.context import Context
from pydsh.kernel.errors import PydshError
from pydsh.llm.stream_records import BlockAssembler, expand_assistant_stream
from pydsh.session.hooks import SESSION_EVENT
from pydsh.session.keys import SESSION_PROJECTIONS
from pydsh.session.projections import SessionProjections, Wire

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from pydsh.session.events import Event
    from pydsh.session.log import Session


class MeterError(PydshError, ValueError):
    """A session log the meter cannot fold (e.g. an assistant message outside a step)."""


# -- measurement ------------------------------------------------------------------------------


T = TypeVar("T")


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def validate(kind: type[T], raw: object) -> T:
    """``raw`` validated as ``kind``; the validator is built on first use (too slow for start-up)."""
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return cast(T, adapter.validate_python(raw))


def int_map(raw: object) -> dict[str, int]:
    """A unit's wire view, checked to map names to integers (a plain check: building a validator imports
    pydantic, which a terminal's first paint cannot afford)."""
    if isinstance(raw, dict) and all(
        isinstance(name, str) and isinstance(value, int) and not isinstance(value, bool) for name, value in raw.items()
    ):
        return raw
    raise TypeError(f"a meter view maps names to integers, got {raw!r}")


@dataclass(frozen=True, slots=True)
class Baseline:
    """``usage`` (provider-anchored), ``estimated`` or ``none``."""

    kind: str
    tokens: int
    usage: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class NodePrice:
    seq: int
    tokens: int
    heuristic_tokens: int


@dataclass(frozen=True, slots=True)
class Measurement:
    """What ``measure`` answers; ``total_tokens`` is what compaction compares to its threshold."""

    log_revision: int
    baseline: Baseline
    surface_delta_tokens: int
    total_tokens: int
    surface_tokens: int
    nodes: tuple[NodePrice, ...]

    def to_json(self) -> dict[str, Any]:
        """The spec's camelCase shape."""
        baseline: dict[str, Any] = {"kind": self.baseline.kind, "tokens": self.baseline.tokens}
        if self.baseline.usage is not None:
            baseline["usage"] = dict(self.baseline.usage)
        return {
            "logRevision": self.log_revision,
            "baseline": baseline,
            "surfaceDeltaTokens": self.surface_delta_tokens,
            "totalTokens": self.total_tokens,
            "surfaceTokens": self.surface_tokens,
            "nodes": [{"seq": n.seq, "tokens": n.tokens, "heuristicTokens": n.heuristic_tokens} for n in self.nodes],
        }


def usage_total(usage: dict[str, Any]) -> int:
    """Input (uncached), cache read, cache write and output tokens of one usage sample."""
    return (
        int(usage.get("inputTokens") or 0)
        + int(usage.get("cacheReadTokens") or 0)
        + int(usage.get("cacheWriteTokens") or 0)
        + int(usage.get("outputTokens") or 0)
    )


def assistant_tokens(stream: Any) -> int:
    """Heuristic price of the blocks assembled from an assistant stream (+4; 0 without blocks)."""
    if not stream:
        return 0
    assembler = BlockAssembler()
    for _time, chunk in expand_assistant_stream(list(stream)):
        assembler.add(chunk)
    blocks = assembler.content()
    return price_blocks(blocks) + 4 if blocks else 0


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class _Anchor:
    header: dict[str, Any]
    surface_tokens: int
    node_count: int
    assistant_tokens: int
    usage: dict[str, Any]


class _MeterFold:
    """Per-session fold: surface nodes with prices, the latest header, the usage anchor."""

    __slots__ = (
        "__weakref__",
        "upto",
        "nodes",
        "priced",
        "prices",
        "surface",
        "header",
        "step_open",
        "anchor",
        "tools",
    )

    def __init__(self) -> None:
        self.upto = 0
        self.nodes: list[int] = []
        self.priced: list[NodePrice] = []
        """The nodes with their prices, kept beside ``nodes`` so a measurement copies them instead of building them."""
        self.prices: dict[int, int] = {}
        self.surface = 0
        self.header: dict[str, Any] | None = None
        self.step_open = False
        self.anchor: _Anchor | None = None
        self.tools: tuple[object, int] = (None, 0)

    def tools_tokens(self, header: dict[str, Any]) -> int:
        """Price of a header's tools, kept for the session's (immutable) logged tool list: a process-wide slot
        would be taken by another session's list at every step when many run at once."""
        tools = header.get("tools")
        if tools is not None and self.tools[0] is tools:
            return self.tools[1]
        price = tools_tokens(tools)
        self.tools = (tools, price)
        return price

    def sync(self, events: list[Event]) -> None:
        for i in range(self.upto, len(events)):
            self.apply(events[i])
            self.upto = i + 1

    def apply(self, event: Event) -> None:
        """Fold one event; a malformed one raises before anything changes."""
        etype = event["type"]
        data = event["data"]
        if etype == "assistant/message":
            if not self.step_open:
                raise MeterError(f"seq {event['seq']}: assistant/message without a matching step/start")
            usage = data.get("usage")
            if usage and self.header is not None:
                self.anchor = _Anchor(
                    self.header, self.surface, len(self.nodes), assistant_tokens(data.get("stream")), dict(usage)
                )
        elif etype == "request/header":
            self.header = data["header"]
        elif etype == "step/start":
            self.step_open = True
        elif etype == "step/end":
            self.step_open = False
        op = event.get("surfaceOp")
        if op is not None:
            self._surface(event, op)

    def _surface(self, event: Event, op: Any) -> None:
        seq = event["seq"]
        price = price_event(event)
        self.prices[seq] = price
        if op == "append":
            self.nodes.append(seq)
            self.priced.append(NodePrice(seq, price, price))
            self.surface += price
            return
        first = self.nodes.index(op["startSeq"])
        last = self.nodes.index(op["endSeq"])
        removed = sum(self.prices[s] for s in self.nodes[first : last + 1])
        self.nodes[first : last + 1] = [seq]
        self.priced[first : last + 1] = [NodePrice(seq, price, price)]
        self.surface += price - removed


class TokenMeter:
    """The ``token_meter`` service (spec 10 §2.3)."""

    def __init__(self) -> None:
        self._folds: weakref.WeakKeyDictionary[Session, _MeterFold] = weakref.WeakKeyDictionary()

    def _fold(self, session: Session) -> _MeterFold:
        fold = self._folds.get(session)
        if fold is None:
            fold = _MeterFold()
            self._folds[session] = fold
        fold.sync(session.events)
        return fold

    def on_event(self, session: Session, event: Event) -> None:
        """Keep folds of tracked sessions current (the rest sync lazily on ``measure``)."""
        if session in self._folds:
            self._fold(session)

    def estimate_message(self, message: dict[str, Any]) -> int:
        return estimate_message(message)

    def measure(self, session: Session, request_header: dict[str, Any] | None = None) -> Measurement:
        """Current pressure and per-node prices through the durable tail (detached, immutable)."""
        fold = self._fold(session)
        header = request_header if request_header is not None else fold.header
        surface = fold.surface
        nodes = tuple(fold.priced)
        revision = len(session.events)
        if header is None and not nodes:
            return Measurement(revision, Baseline("none", 0), 0, 0, 0, nodes)
        tools = fold.tools_tokens(header) if header is not None else 0
        anchor = fold.anchor
        if anchor is not None and header is not None and _same_header(anchor.header, header):
            anchor_surface = anchor.surface_tokens + anchor.assistant_tokens
            estimated = tools + anchor_surface
            reported = usage_total(anchor.usage)
            baseline = (
                Baseline("usage", reported, anchor.usage) if reported >= estimated else Baseline("estimated", estimated)
            )
            delta = surface - anchor_surface
        else:
            baseline = Baseline("estimated", tools + surface)
            delta = 0
        return Measurement(revision, baseline, delta, max(0, baseline.tokens + delta), surface, nodes)


def _same_header(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a is b or _canon(a) == _canon(b)


# -- projection units (spec 10 §2.5) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """A shadow price armed by ``compaction/summary`` / ``compaction/prune`` for the next replace."""

    start: int
    end: int
    tokens: int
    seqs: tuple[int, ...] = ()


def _claim_of(event: Event) -> Claim | None:
    if event["type"] not in ("compaction/summary", "compaction/prune"):
        return None
    data = event["data"]
    shadowed = data["shadowedRange"]
    return Claim(
        shadowed["start"], shadowed["end"], int(data["shadowedTokenCount"]), tuple(data.get("shadowedSeqs") or ())
    )


def _surface_change(claim: Claim | None, event: Event) -> tuple[int, Claim | None, bool]:
    """``(delta, consumed claim, is_replace)`` of one surface event under the shadow-price protocol."""
    op = event["surfaceOp"]
    price = price_event(event)
    if op == "append":
        return price, None, False
    if claim is None:
        return 0, None, True
    if (claim.start, claim.end) != (op["startSeq"], op["endSeq"]):
        raise MeterError(
            f"seq {event['seq']}: replace {op['startSeq']}..{op['endSeq']} does not match the armed shadow claim "
            f"{claim.start}..{claim.end}"
        )
    return price - claim.tokens, claim, True


def _sample(event: Event) -> dict[str, Any] | None:
    """The usage sample of an ``assistant/message`` or (last usage chunk of) an ``assistant/attempt``."""
    etype = event["type"]
    if etype == "assistant/message":
        usage = event["data"].get("usage")
        return dict(usage) if usage else None
    if etype == "assistant/attempt":
        found = None
        for _time, chunk in expand_assistant_stream(list(event["data"].get("stream") or ())):
            if chunk["type"] == "usage":
                found = chunk["usage"]
        return dict(found) if found else None
    return None


Buckets = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class TokenUsageState:
    totals: Buckets = (0, 0, 0, 0)
    slot: tuple[int, int] | None = None
    slot_buckets: Buckets = (0, 0, 0, 0)
    slot_closed: bool = False


def _buckets(usage: dict[str, Any]) -> Buckets:
    return (
        int(usage.get("inputTokens") or 0),
        int(usage.get("outputTokens") or 0),
        int(usage.get("cacheReadTokens") or 0),
        int(usage.get("cacheWriteTokens") or 0),
    )


class TokenUsageUnit:
    """``tokenUsage``: usage totals over the log; a repeated sample in one step replaces the last."""

    key = "tokenUsage"
    state_version = 2

    def state_schema(self, raw: object) -> TokenUsageState:
        return validate(TokenUsageState, raw)

    def init(self, header: dict[str, Any], inherited_event_count: int) -> TokenUsageState:
        return TokenUsageState()

    def apply(self, state: TokenUsageState, event: Event) -> TokenUsageState:
        etype = event["type"]
        if etype == "llm/retry-started":
            data = event["data"]
            if state.slot == (data["turn"], data["step"]) and not state.slot_closed:
                return replace(state, slot_closed=True)
            return state
        if etype not in ("assistant/message", "assistant/attempt"):
            return state
        usage = _sample(event)
        if usage is None:
            return state
        new = _buckets(usage)
        slot = (event["data"]["turn"], event["data"]["step"])
        base = state.totals
        if state.slot == slot and not state.slot_closed:
            base = tuple(t - o for t, o in zip(base, state.slot_buckets, strict=True))  # type: ignore[assignment]
        totals: Buckets = tuple(t + n for t, n in zip(base, new, strict=True))  # type: ignore[assignment]
        return TokenUsageState(totals, slot, new, False)

    @staticmethod
    def view(state: TokenUsageState) -> dict[str, int]:
        uncached, output, read, write = state.totals
        return {
            "uncachedInputTokens": uncached,
            "outputTokens": output,
            "cacheReadTokens": read,
            "cacheWriteTokens": write,
        }

    wire = Wire(view=view, view_schema=int_map)


@dataclass(frozen=True, slots=True)
class ContextPressureState:
    context_window: int | None = None
    pressure_tokens: int | None = None
    sampled_surface_tokens: int = 0
    surface_tokens: int = 0
    claim: Claim | None = None


class ContextPressureUnit:
    """``contextPressure``: the last prompt-side usage plus the surface change since it was sampled."""

    key = "contextPressure"
    state_version = 5

    def state_schema(self, raw: object) -> ContextPressureState:
        return validate(ContextPressureState, raw)

    def init(self, header: dict[str, Any], inherited_event_count: int) -> ContextPressureState:
        return ContextPressureState()

    def apply(self, state: ContextPressureState, event: Event) -> ContextPressureState:
        etype = event["type"]
        claim = _claim_of(event)
        if claim is not None:
            return replace(state, claim=claim)
        out = state if state.claim is None else replace(state, claim=None)
        armed = state.claim
        if etype == "request/context":
            window = event["data"].get("contextWindow")
            out = replace(out, context_window=window if isinstance(window, int) else None)
        usage = _sample(event)
        if usage is not None:
            pressure = (
                int(usage.get("inputTokens") or 0)
                + int(usage.get("cacheReadTokens") or 0)
                + int(usage.get("cacheWriteTokens") or 0)
            )
            out = replace(out, pressure_tokens=pressure, sampled_surface_tokens=out.surface_tokens)
        if event.get("surfaceOp") is not None:
            delta, _used, _replace = _surface_change(armed, event)
            if delta:
                out = replace(out, surface_tokens=out.surface_tokens + delta)
        return out

    @staticmethod
    def view(state: ContextPressureState) -> dict[str, int]:
        out: dict[str, int] = {}
        if state.context_window is not None:
            out["contextWindow"] = state.context_window
        if state.pressure_tokens is not None:
            out["pressureTokens"] = state.pressure_tokens
            projected = state.pressure_tokens + state.surface_tokens - state.sampled_surface_tokens
            out["projectedTokens"] = max(0, projected)
        return out

    wire = Wire(view=view, view_schema=int_map)


@dataclass(frozen=True, slots=True)
class ContextBreakdownState:
    system_nodes: tuple[tuple[int, int], ...] = ()
    tools_tokens: int = 0
    surface_tokens: int = 0
    claim: Claim | None = None


class ContextBreakdownUnit:
    """``contextBreakdown``: system prompt, tools and message shares of the surface."""

    key = "contextBreakdown"
    state_version = 6

    def state_schema(self, raw: object) -> ContextBreakdownState:
        return validate(ContextBreakdownState, raw)

    def init(self, header: dict[str, Any], inherited_event_count: int) -> ContextBreakdownState:
        return ContextBreakdownState()

    def apply(self, state: ContextBreakdownState, event: Event) -> ContextBreakdownState:
        claim = _claim_of(event)
        if claim is not None:
            return replace(state, claim=claim)
        out = state if state.claim is None else replace(state, claim=None)
        armed = state.claim
        etype = event["type"]
        if etype == "request/header":
            out = replace(out, tools_tokens=tools_tokens(event["data"]["header"].get("tools")))
        op = event.get("surfaceOp")
        if op is None:
            return out
        delta, used, is_replace = _surface_change(armed, event)
        system = out.system_nodes
        if used is not None:
            system = tuple(n for n in system if n[0] not in used.seqs)
        elif is_replace and op["startSeq"] == op["endSeq"] and etype == "system/message":
            old = next((n for n in system if n[0] == op["startSeq"]), None)
            if old is not None:
                system = tuple(n for n in system if n is not old)
                delta = price_event(event) - old[1]
        if etype == "system/message":
            system = (*system, (event["seq"], price_event(event)))
        if delta or system is not out.system_nodes:
            out = replace(out, system_nodes=system, surface_tokens=out.surface_tokens + delta)
        return out

    @staticmethod
    def view(state: ContextBreakdownState) -> dict[str, int]:
        system = next((price for _seq, price in reversed(state.system_nodes) if price > 0), 0)
        return {
            "systemTokens": system,
            "toolsTokens": state.tools_tokens,
            "messageTokens": state.surface_tokens - system,
        }

    wire = Wire(view=view, view_schema=int_map)


UNITS = (TokenUsageUnit, ContextPressureUnit, ContextBreakdownUnit)


# -- plugin --------------------------------------------------------------------------------------


class Config(BaseModel):
    """The meter takes no configuration: any key is refused by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_keys(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and raw:
            raise ValueError(f'TokenMeterConfig: unknown key "{next(iter(raw))}" (no settings are supported)')
        if raw not in (None, {}):
            raise ValueError("TokenMeterConfig: expected no config (no settings are supported)")
        return {}


name = "token-meter"
inject = (SESSION_PROJECTIONS,)


def apply(ctx: Context, config: Config) -> None:
    """Provide the meter and register its units; refuse to load anywhere but the host plane."""
    if ctx.scope is not None or ctx.realm_of("token_meter") is not ctx.runtime.root_realm:
        raise ValueError(
            "token-meter belongs to the host composition (base): it must not be mounted inside an agent preset "
            "or an isolate realm, where its process-wide projection units would depend on which presets are mounted"
        )
    meter = TokenMeter()
    ctx.provide(TOKEN_METER, meter)
    projections: SessionProjections = ctx.require(SESSION_PROJECTIONS)
    for unit in UNITS:
        projections.register(ctx, unit())
    ctx.on(SESSION_EVENT, meter.on_event, global_=True)
