"""``compaction-basic``: budgets, triggers, range selection, the transaction and the summariser (spec 10 §4).

The engine replaces a balanced span of the surface with one checkpoint ``user/message``. The
log keeps every original event; only the derived model view changes. The four events of a
compaction are written so that any prefix of the log is either the old history or the new one.
"""

from __future__ import annotations

import logging
import math
import uuid
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import PRE_STEP, REQUEST_ERROR, PreStep, PreStepDecision, RequestError, RetryAnswer
from pydsh.agent.loop import error_chain
from pydsh.compaction.engine import (
    CompactionError,
    ManualCompactionError,
    SummaryError,
    SurfaceChangedError,
    TargetPressureConfigError,
    Trigger,
    compact_checkpoint_source,
    config_error,
    open_compaction,
    pairing_counts,
)
from pydsh.compaction.hooks import SUMMARY_ERROR, SummaryFailure
from pydsh.compaction.keys import COMPACTION, TOKEN_METER, TOOL_RESULT_PRUNER
from pydsh.compaction.summary import INSTRUCTION, checkpoint_content
from pydsh.contract.agent import user_message
from pydsh.kernel.config import BaseModel, ConfigDict, Field, model_validator
from pydsh.kernel.context import Context
from pydsh.kernel.errors import KernelError
from pydsh.kernel.events import Next
from pydsh.llm.keys import LLM
from pydsh.llm.stream_records import BlockAssembler
from pydsh.llm.types import LlmError
from pydsh.session.keys import SESSIONS
from pydsh.session.surface import derive_event_message

if TYPE_CHECKING:
    from pydsh.compaction.meter import Measurement, TokenMeter
    from pydsh.compaction.pruner import ToolResultPruner
    from pydsh.kernel.cancel import AbortSignal
    from pydsh.session.log import Session, SessionStore

log = logging.getLogger("pydsh.compaction")


SETTING_KEYS = (
    "thresholdRatio",
    "headroomTokens",
    "retainRatio",
    "retainTokens",
    "summarizationProvider",
    "summarizationModel",
    "maxTokens",
    "compactionRetries",
    "maxOverflowRetries",
)
CONFIG_KEYS = frozenset({"auto", "modelPolicies", *SETTING_KEYS})
POLICY_KEYS = frozenset({"provider", "model", *SETTING_KEYS})
DEFAULT_RETAIN_RATIO = 0.16


def _unknown(raw: Any, allowed: frozenset[str], where: str) -> Any:
    if isinstance(raw, dict):
        for key in raw:
            if key not in allowed:
                raise config_error(f'BasicCompactionConfig: unknown key "{key}"{where}')
    return raw


class Settings(BaseModel):
    """The per-target compaction settings (§4.2), validated as a whole."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    thresholdRatio: float = Field(default=0.8, gt=0, le=1)
    headroomTokens: int = Field(default=65536, ge=0)
    retainRatio: float | None = Field(default=None, gt=0, le=1)
    retainTokens: int | None = Field(default=None, ge=0)
    summarizationProvider: str = ""
    summarizationModel: str = ""
    maxTokens: int | None = Field(default=None, gt=0)
    compactionRetries: int = Field(default=1, ge=0)
    maxOverflowRetries: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        if self.retainRatio is not None and self.retainTokens is not None:
            raise config_error("BasicCompactionConfig: retainRatio and retainTokens are mutually exclusive")
        if self.retain_ratio is not None and self.retain_ratio >= self.thresholdRatio:
            raise config_error(
                f"BasicCompactionConfig: retainRatio ({self.retain_ratio}) must be below thresholdRatio "
                f"({self.thresholdRatio})"
            )
        if bool(self.summarizationProvider) != bool(self.summarizationModel):
            raise config_error("BasicCompactionConfig: set summarizationProvider and summarizationModel together")
        return self

    @property
    def retain_ratio(self) -> float | None:
        """The effective ratio (the default applies when neither retain key is set)."""
        if self.retainTokens is not None:
            return None
        return self.retainRatio if self.retainRatio is not None else DEFAULT_RETAIN_RATIO

    @property
    def summary_max_tokens(self) -> int:
        return self.maxTokens if self.maxTokens is not None else self.headroomTokens


class Config(Settings):
    """``compaction-basic`` configuration: settings, ``auto`` and per-model partial overrides."""

    auto: bool = True
    modelPolicies: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, raw: Any) -> Any:
        return _unknown(raw, CONFIG_KEYS, "")

    @model_validator(mode="after")
    def _policies(self) -> Config:
        seen: set[tuple[str, str]] = set()
        for i, policy in enumerate(self.modelPolicies):
            _unknown(policy, POLICY_KEYS, f" in modelPolicies[{i}]")
            pair = (policy.get("provider"), policy.get("model"))
            if not all(isinstance(p, str) and p for p in pair):
                raise config_error(f"BasicCompactionConfig: modelPolicies[{i}] needs provider and model")
            if pair in seen:
                raise config_error(f"BasicCompactionConfig: duplicate modelPolicies entry for {pair[0]}/{pair[1]}")
            seen.add(pair)  # type: ignore[arg-type]
            self.settings_for(pair[0], pair[1])  # type: ignore[arg-type]
        return self

    def settings_for(self, provider: str, model: str) -> Settings:
        """The settings of one exact target: the base with its policy's fields laid over."""
        base = {k: getattr(self, k) for k in SETTING_KEYS if k in self.model_fields_set}
        for policy in self.modelPolicies:
            if (policy.get("provider"), policy.get("model")) == (provider, model):
                override = {k: v for k, v in policy.items() if k not in ("provider", "model")}
                if "retainTokens" in override:
                    base.pop("retainRatio", None)
                if "retainRatio" in override:
                    base.pop("retainTokens", None)
                base |= override
        return Settings(**base)


@dataclass(frozen=True)
class Budgets:
    """The routed target's numbers (§4.2)."""

    context_window: int
    threshold: int
    retain: int


@dataclass(frozen=True)
class CompactionResult:
    compaction_id: str
    checkpoint_seq: int
    shadowed_seqs: tuple[int, ...]
    shadowed_token_count: int
    checkpoint_tokens: int


def select_range(session: Session, m: Measurement, retain: int) -> tuple[int, int] | None:
    """The span to compact: everything before a balanced tail worth at least ``retain`` tokens (§4.5)."""
    nodes = session.surface.nodes
    if [n.seq for n in m.nodes] != nodes:
        raise CompactionError("compaction: the measurement does not match the current surface")
    first = 1 if nodes and session.events[nodes[0]]["type"] == "system/message" else 0
    kept = len(nodes)
    total = 0
    while kept > first and total < retain:
        kept -= 1
        total += m.nodes[kept].tokens
    counts = pairing_counts(session)
    while kept > first and counts[kept - 1] != 0:
        kept -= 1
    if kept <= first:
        return None
    return nodes[first], nodes[kept - 1]


class BasicCompaction:
    """The ``compaction`` service of ``compaction-basic``."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.llm = ctx.require(LLM)
        self.meter: TokenMeter = ctx.require(TOKEN_METER)
        self.sessions: SessionStore = ctx.require(SESSIONS)

    # -- budgets ----------------------------------------------------------------------------

    @staticmethod
    def target(session: Session) -> tuple[str, str] | None:
        """Provider and model of the latest logged ``request/header``."""
        header = session.request_header()
        if header is None:
            return None
        config = header["config"]
        return str(config["provider"]), str(config["model"])

    async def budgets(self, session: Session, provider: str, model: str) -> Budgets:
        """Threshold and retain of the target, or :class:`TargetPressureConfigError` naming the numbers."""
        settings = self.config.settings_for(provider, model)
        info = await self.llm.resolve_model_info(provider, model)
        window = (info.get("context") or {}).get("contextWindow")
        name = f"{provider}/{model}"
        if not window:
            raise TargetPressureConfigError(f"compaction target {name} has no contextWindow in its model info")
        header = session.request_header() or {}
        reserved = (header.get("config") or {}).get("maxTokens") or info.get("defaultMaxTokens") or 0
        message_budget = window - reserved
        pressure_budget = message_budget - settings.headroomTokens
        if message_budget <= 0 or pressure_budget <= 0:
            raise TargetPressureConfigError(
                f"compaction target {name}: contextWindow {window} - reserved {reserved} - headroomTokens "
                f"{settings.headroomTokens} leaves no pressure budget ({pressure_budget})"
            )
        threshold = math.floor(min(window * settings.thresholdRatio, pressure_budget))
        ratio = settings.retain_ratio
        retain = settings.retainTokens if ratio is None else math.floor(message_budget * ratio)
        assert retain is not None
        if retain >= threshold:
            raise TargetPressureConfigError(
                f"compaction target {name}: retain {retain} tokens is not below the threshold {threshold}"
            )
        return Budgets(window, threshold, retain)

    # -- policy entry points ----------------------------------------------------------------

    async def compact_if_needed(self, agent: Any, trigger: Trigger, signal: AbortSignal | None) -> Any:
        """Compact when the pressure is at the threshold, or once maximally after a provider overflow."""
        session = agent.session
        target = self.target(session)
        if target is None:
            return None
        if trigger == "context-overflow":
            return await self._overflow_compaction(agent, signal)
        budgets = await self.budgets(session, *target)
        m = self.meter.measure(session)
        if m.total_tokens < budgets.threshold:
            return None
        self._check_lock(session, "pressure")
        if self._prune(session):
            m = self.meter.measure(session)
            if m.total_tokens < budgets.threshold:
                return None
        result = None
        attempts = self.config.settings_for(*target).compactionRetries + 1
        for _ in range(attempts):
            span = select_range(session, m, budgets.retain)
            if span is None:
                return result
            result = await self.compact_region(span[0], span[1], agent, signal)
            m = self.meter.measure(session)
            if m.total_tokens < budgets.threshold:
                return result
        raise CompactionError(
            f"compaction still above threshold after {attempts} compaction attempts "
            f"({m.total_tokens} estimated tokens >= threshold {budgets.threshold})"
        )

    async def _overflow_compaction(self, agent: Any, signal: AbortSignal | None) -> Any:
        session = agent.session
        self._check_lock(session, "context-overflow")
        self._prune(session)
        span = select_range(session, self.meter.measure(session), 0)
        if span is None:
            return None
        return await self.compact_region(span[0], span[1], agent, signal)

    async def compact_now(self, agent: Any, signal: AbortSignal | None, source_command_id: str | None = None) -> Any:
        """Manual ``/compact`` from true idle (§4.8): the whole balanced history, ``turn: null``, then a flush."""
        if agent.status != "idle" or agent.inbox.has_pending:
            raise ManualCompactionError("busy")

        async def job(job_signal: AbortSignal) -> Any:
            session = agent.session
            self._check_lock(session, "manual")
            span = select_range(session, self.meter.measure(session), 0)
            if span is None:
                raise ManualCompactionError("summary", "manual compaction found no history to compact")
            try:
                result = await self._transaction(agent, span, job_signal, source_command_id, manual=True)
            except SurfaceChangedError:
                raise ManualCompactionError("changed") from None
            except SummaryError as exc:
                raise ManualCompactionError("summary", f"manual compaction could not produce a summary: {exc}") from exc
            except (LlmError, CompactionError) as exc:
                if job_signal.aborted:
                    raise ManualCompactionError("cancelled") from exc
                if isinstance(exc, ManualCompactionError):
                    raise
                raise ManualCompactionError("summary", f"manual compaction could not produce a summary: {exc}") from exc
            except Exception as exc:
                raise ManualCompactionError("commit", f"manual compaction did not commit cleanly: {exc}") from exc
            try:
                await self.sessions.flush(session)
            except Exception as exc:
                raise ManualCompactionError("persistence") from exc
            return result

        try:
            return await agent.run_maintenance(job)
        except RuntimeError as exc:
            raise ManualCompactionError("busy") from exc

    async def compact_region(
        self,
        start: int,
        end: int,
        agent: Any,
        signal: AbortSignal | None = None,
        *,
        source_command_id: str | None = None,
    ) -> Any:
        """Compact the inclusive surface span ``start..end`` inside the open turn (§4.6)."""
        session = agent.session
        if session.open_turn is None:
            raise CompactionError("compactRegion: automatic compaction needs an open turn")
        return await self._transaction(agent, (start, end), signal, source_command_id, manual=False)

    async def compact_in_turn(self, agent: Any, signal: AbortSignal | None, source_command_id: str) -> Any:
        """``/compact`` typed as a prompt: the whole balanced history, inside the turn the prompt opened."""
        session = agent.session
        self._check_lock(session, "command")
        span = select_range(session, self.meter.measure(session), 0)
        if span is None:
            return None
        return await self.compact_region(span[0], span[1], agent, signal, source_command_id=source_command_id)

    # -- the transaction --------------------------------------------------------------------

    @staticmethod
    def _check_lock(session: Session, stage: str) -> None:
        if open_compaction(session) is not None:
            raise ManualCompactionError(
                "busy",
                f"{stage}: compaction already in progress; the session compaction lock is already active",
            )

    def _prune(self, session: Session) -> int:
        pruner: ToolResultPruner | None = self.ctx.get(TOOL_RESULT_PRUNER)
        return pruner.prune_session(session) if pruner is not None else 0

    def _span(self, session: Session, start: int, end: int) -> list[int]:
        nodes = session.surface.nodes
        if start not in nodes or end not in nodes or nodes.index(start) > nodes.index(end):
            raise CompactionError(f"compactRegion: {start}..{end} is not an ordered span of current surface nodes")
        first, last = nodes.index(start), nodes.index(end)
        if first == 0 and session.events[start]["type"] == "system/message":
            raise CompactionError("compactRegion: the system head is never compacted")
        counts = pairing_counts(session)
        if first > 0 and counts[first - 1] != 0:
            raise CompactionError(
                f"compactRegion: start seq {start} is not a balanced boundary "
                "(would split a step's tool-call/result pair)"
            )
        if counts[last] != 0:
            raise CompactionError(
                f"compactRegion: end seq {end} is not a balanced boundary (would split a step's tool-call/result pair)"
            )
        return nodes[first : last + 1]

    async def _transaction(
        self,
        agent: Any,
        span: tuple[int, int],
        signal: AbortSignal | None,
        source_command_id: str | None,
        *,
        manual: bool,
    ) -> CompactionResult:
        session = agent.session
        shadowed = self._span(session, *span)
        self._check_lock(session, "compactRegion")
        compaction_id = str(uuid.uuid4())
        ids: dict[str, Any] = {"compactionId": compaction_id}
        if source_command_id is not None:
            ids["sourceCommandId"] = source_command_id
        turn = None if manual else session.open_turn
        start_seq = session.append("compaction/start", {**ids, "turn": turn})["seq"]
        try:
            result = await self._summarise_and_commit(agent, shadowed, signal, ids, start_seq, manual=manual)
        except BaseException as exc:
            try:
                session.append("compaction/end", {**ids, "turn": turn, "error": error_chain(exc)})
            except Exception as end_exc:
                log.warning("compaction %s: could not close the bracket: %s", compaction_id, error_chain(end_exc))
            raise
        session.append("compaction/end", {**ids, "turn": turn})
        return result

    async def _summarise_and_commit(
        self,
        agent: Any,
        shadowed: list[int],
        signal: AbortSignal | None,
        ids: dict[str, Any],
        start_seq: int,
        *,
        manual: bool,
    ) -> CompactionResult:
        session = agent.session
        while True:
            surface_before = list(session.surface.nodes)
            first = surface_before.index(shadowed[0])
            prices = {n.seq: n for n in self.meter.measure(session).nodes}
            try:
                summary = await self._summarise(agent, shadowed, signal)
                break
            except (LlmError, SummaryError) as exc:
                payload = SummaryFailure(session=session, sourceEventSeqs=list(shadowed), error=exc, signal=signal)
                repaired = await self.ctx.waterfall(SUMMARY_ERROR, payload, lambda: False, scope=agent)
                if repaired is not True or (signal is not None and signal.aborted):
                    raise
                if len(session.surface.nodes) != len(surface_before):
                    raise SurfaceChangedError() from exc
                shadowed = session.surface.nodes[first : first + len(shadowed)]
        now = list(session.surface.nodes)
        if (manual and not set(shadowed) <= set(now)) or (not manual and now != surface_before):
            raise SurfaceChangedError()
        source = compact_checkpoint_source(ids["compactionId"], ids.get("sourceCommandId"))
        checkpoint = user_message(checkpoint_content(summary.blocks), source)
        checkpoint_tokens = self.meter.estimate_message(checkpoint)
        route_price = sum(prices[s].tokens for s in shadowed)
        if checkpoint_tokens >= route_price:
            raise SummaryError(
                f"summary is not smaller than the shadowed content ({checkpoint_tokens} estimated framed tokens "
                f">= {route_price})"
            )
        shadowed_tokens = sum(prices[s].heuristic_tokens for s in shadowed)
        record: dict[str, Any] = {
            **ids,
            "summary": summary.blocks,
            "rawOutput": summary.raw,
            "llmStreamCall": True,
            "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
            "shadowedSeqs": shadowed,
            "shadowedTokenCount": shadowed_tokens,
            "provider": summary.provider,
            "model": summary.model,
            "maxTokens": summary.max_tokens,
        }
        if summary.usage is not None:
            record["usage"] = summary.usage
        summary_seq = session.append("compaction/summary", record)["seq"]
        replace = {"op": "replace", "startSeq": shadowed[0], "endSeq": shadowed[-1]}
        checkpoint_seq = session.append(
            "user/message", checkpoint, surface_op=replace, source_event_seqs=[start_seq, summary_seq, *shadowed]
        )["seq"]
        return CompactionResult(
            ids["compactionId"], checkpoint_seq, tuple(shadowed), shadowed_tokens, checkpoint_tokens
        )

    # -- the summariser ---------------------------------------------------------------------

    def _summary_target(self, agent: Any) -> tuple[str, str]:
        session = agent.session
        settings = self.config
        target = self.target(session)
        if target is not None:
            settings = self.config.settings_for(*target)  # type: ignore[assignment]
        if settings.summarizationProvider:
            return settings.summarizationProvider, settings.summarizationModel
        if target is not None:
            return target
        options = agent.options
        if options.provider and options.model:
            return str(options.provider), str(options.model)
        raise CompactionError(
            "no provider/model available for summarization: no summarization pair is configured, no request was "
            "logged and the agent has no route"
        )

    async def _summarise(self, agent: Any, shadowed: list[int], signal: AbortSignal | None) -> _Summary:
        session = agent.session
        provider, model = self._summary_target(agent)
        target = self.target(session)
        settings = self.config.settings_for(*target) if target is not None else self.config
        events = session.events
        messages: list[Any] = []
        head = session.surface.nodes[0] if session.surface.nodes else None
        if head is not None and events[head]["type"] == "system/message":
            system = derive_event_message(events[head])
            if system is not None:
                messages.append(system)
        for seq in shadowed:
            message = derive_event_message(events[seq])
            if message is not None:
                messages.append(message)
        messages.append(user_message(INSTRUCTION, {"kind": "user"}))
        max_tokens = settings.summary_max_tokens
        options: dict[str, Any] = {
            "provider": provider,
            "model": model,
            "messages": messages,
            "toolHistory": session.tool_history(),
            "maxTokens": max_tokens,
            "sessionId": session.id,
            "purpose": "compaction",
            "signal": signal,
        }
        tools = (session.request_header() or {}).get("tools")
        if tools:
            options["tools"] = tools
        assembler = BlockAssembler()
        async for chunk in self.llm.stream(options):
            assembler.add(chunk)
        return _Summary.of(assembler, provider, model, max_tokens)


@dataclass(frozen=True)
class _Summary:
    blocks: list[dict[str, Any]]
    raw: list[dict[str, Any]]
    usage: dict[str, Any] | None
    provider: str
    model: str
    max_tokens: int

    @classmethod
    def of(cls, assembler: BlockAssembler, provider: str, model: str, max_tokens: int) -> _Summary:
        """Apply the output rules of §4.9 to one finished summariser stream."""
        finish = assembler.finish
        kind = finish.get("kind")
        if kind in ("error", "aborted"):
            failure = finish.get("failure") or {"message": f"summarization {kind}", "code": kind.upper()}
            raise LlmError.from_failure(failure)
        if kind == "max-tokens":
            raise LlmError("summarization truncated at the token cap (incomplete checkpoint)", "MAX_TOKENS")
        raw = [dict(b) for b in assembler.content()]
        if any(b.get("type") == "image" for b in raw):
            raise LlmError("compaction summary cannot contain image output", "UNSUPPORTED_CONTENT")
        blocks = [{"type": "text", "text": b["text"]} for b in raw if b.get("type") == "text"]
        if not any(b["text"].strip() for b in blocks):
            raise SummaryError("summarization produced no text summary content")
        return cls(blocks, raw, assembler.usage, provider, model, max_tokens)


# -- plugin -----------------------------------------------------------------------------------


class Triggers:
    """The automatic triggers: pressure before each step, one overflow recovery per turn."""

    def __init__(self, engine: BasicCompaction) -> None:
        self.engine = engine
        self.warned: set[tuple[str, str]] = set()
        self.overflows: weakref.WeakKeyDictionary[Any, tuple[int, int, int]] = weakref.WeakKeyDictionary()

    async def pre_step(self, payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        """Shorten the history before the step's request is derived; failures never stop the turn."""
        agent, signal = payload["agent"], payload.get("signal")
        if signal is None or not signal.aborted:
            try:
                await self.engine.compact_if_needed(agent, "pressure", signal)
            except TargetPressureConfigError as exc:
                target = self.engine.target(agent.session) or ("", "")
                if target not in self.warned:
                    self.warned.add(target)
                    log.warning("step compaction failed: %s; continuing the turn", exc)
            except Exception as exc:
                log.warning("step compaction failed: %s; continuing the turn", error_chain(exc))
        return await nxt()

    async def request_error(self, payload: RequestError, nxt: Next[RetryAnswer | None]) -> RetryAnswer | None:
        """Answer ``CONTEXT_WINDOW_EXCEEDED`` with one maximal compaction and a retry (§4.4)."""
        agent, signal = payload["agent"], payload.get("signal")
        if payload["failure"].get("code") != "CONTEXT_WINDOW_EXCEEDED" or (signal is not None and signal.aborted):
            return await nxt()
        session = agent.session
        target = self.engine.target(session)
        settings = self.engine.config.settings_for(*target) if target is not None else self.engine.config
        anchor = (payload["turn"], _last_assistant(session))
        turn, last, count = self.overflows.get(agent, (*anchor, 0))
        if (turn, last) != anchor:
            count = 0
        if count >= settings.maxOverflowRetries:
            return await nxt()
        generation = session.surface.replace_generation
        try:
            await self.engine.compact_if_needed(agent, "context-overflow", signal)
        except Exception as exc:
            log.warning("overflow compaction failed: %s", error_chain(exc))
        if session.surface.replace_generation > generation:
            self.overflows[agent] = (*anchor, count + 1)
            return {"kind": "retry"}
        return await nxt()


def _last_assistant(session: Session) -> int:
    """Seq of the latest ``assistant/message`` (-1 when none): a commit resets the overflow counter."""
    events = session.events
    for seq in range(len(events) - 1, -1, -1):
        if events[seq]["type"] == "assistant/message":
            return seq
    return -1


name = "compaction-basic"
inject = (LLM, SESSIONS)


def apply(ctx: Context, config: Config) -> None:
    """Provide ``compaction`` and, with ``auto``, register the step-pressure and overflow triggers."""
    if ctx.get(TOKEN_METER) is None:
        raise KernelError(
            "CONFIG_INVALID",
            "compaction-basic needs the token_meter service: add the token-meter row to the host composition (base)",
        )
    engine = BasicCompaction(ctx, config)
    ctx.provide(COMPACTION, engine)
    if config.auto:
        triggers = Triggers(engine)
        ctx.on(PRE_STEP, triggers.pre_step, name="compaction")
        ctx.on(REQUEST_ERROR, triggers.request_error, name="compaction")
