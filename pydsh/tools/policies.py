"""Cross-cutting tool policies: read-before-write observations, spill of large results, repeat reminders.

Each is a function plugin (spec 05 §3.6–3.8) that the composition can drop by deleting its row.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from pydsh.agent.hooks import AGENT_DISPOSED
from pydsh.contract.agent import user_message
from pydsh.contract.tools import TOOL_POST_EXECUTE, Settled, ToolExec, ToolOutcome
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.kernel.text import utf16_len
from pydsh.session.events import Event
from pydsh.session.hooks import SESSION_EVENT
from pydsh.session.log import Session
from pydsh.tools.files import owner_of
from pydsh.tools.keys import FS_OBSERVATIONS
from pydsh.tools.spill import save


class Observations:
    """The ``fs_observations`` service: per owner (agent), canonical path → last seen version or ``absent``.

    Kept in memory only: after a resume the model reads files again.
    """

    def __init__(self) -> None:
        self._by_owner: dict[str, dict[str, Any]] = {}

    def record(self, owner: str, path: str, version: Any) -> None:
        self._by_owner.setdefault(owner, {})[path] = version

    def get(self, owner: str, path: str) -> Any:
        return self._by_owner.get(owner, {}).get(path)

    def forget(self, owner: str) -> None:
        self._by_owner.pop(owner, None)


def fs_observation_policy(ctx: Context, config: None) -> None:
    """Provide ``fs_observations``; an agent's observations go when it is disposed."""
    observations = Observations()
    ctx.provide(FS_OBSERVATIONS, observations)
    ctx.on(AGENT_DISPOSED, lambda payload: observations.forget(payload["agent"].id), global_=True)


fs_observation_policy.name = "fs-observation-policy"  # type: ignore[attr-defined]
fs_observation_policy.inject = ()  # type: ignore[attr-defined]
fs_observation_policy.Config = None  # type: ignore[attr-defined]


# -- spill of large results (spec 05 §3.6) -------------------------------------------------------

GAP = "\n\n[...]\n\n"
SPILL_NOTICE = (
    "(Omitted {omitted} bytes. Full formatted result stored at: {path}. "
    "Use read with offset/limit, or grep this path to search within it.)"
)


def estimate(content: list[dict[str, Any]]) -> int:
    """Token price of content blocks: ``ceil(len/4) + 4`` per text block, JSON size for the others."""
    total = 0
    for block in content:
        if block.get("type") == "text":
            total += -(-utf16_len(block["text"]) // 4) + 4
        else:
            total += 4 + -(-utf16_len(json.dumps(block, ensure_ascii=False, separators=(",", ":"))) // 4)
    return total


def _head(text: str, units: int) -> str:
    if text.isascii():
        return text[:units]
    used = 0
    for i, c in enumerate(text):
        used += 2 if ord(c) > 0xFFFF else 1
        if used > units:
            return text[:i]
    return text


def _tail(text: str, units: int) -> str:
    if units <= 0:
        return ""
    return _head(text[::-1], units)[::-1]


def shorten(text: str, max_tokens: int, path: str) -> str:
    """Head and tail of ``text`` around the omission gap, with the notice naming the spill file."""
    budget = (max_tokens - 4) * 4
    total_bytes = len(text.encode("utf-8", "surrogatepass"))
    widest = SPILL_NOTICE.format(omitted=total_bytes, path=path)
    available = max(0, budget - utf16_len(GAP) - 2 - utf16_len(widest))
    head = _head(text, available // 2)
    tail = _tail(text[len(head) :], available - available // 2)
    omitted = total_bytes - len(head.encode("utf-8", "surrogatepass")) - len(tail.encode("utf-8", "surrogatepass"))
    return f"{head}{GAP}{tail}\n\n{SPILL_NOTICE.format(omitted=omitted, path=path)}"


class SpillConfig(BaseModel):
    """``maxInlineTokens``: results priced above this are shortened and saved in full."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    maxInlineTokens: int = Field(default=12500, ge=64)


def spill_policy(ctx: Context, config: SpillConfig) -> None:
    """Shorten accepted text results (except ``read``) above the inline budget; keep the whole in a spill file."""

    async def listener(exec: ToolExec, next: Next[Settled]) -> Settled:
        outcome = await next()
        if (
            not isinstance(outcome, ToolOutcome)
            or exec.name == "read"
            or outcome.is_error
            or estimate(outcome.content) <= config.maxInlineTokens
        ):
            return outcome
        texts = [b["text"] for b in outcome.content if b.get("type") == "text"]
        others = [b for b in outcome.content if b.get("type") != "text"]
        full = "\n".join(texts)
        path = save(exec.session.id if exec.session is not None else "", exec.name, full)
        if path is None:
            return outcome
        shortened = shorten(full, config.maxInlineTokens, path)
        return replace(outcome, content=[{"type": "text", "text": shortened}, *others])

    ctx.on(TOOL_POST_EXECUTE, listener, name="spill-policy")


spill_policy.name = "spill-policy"  # type: ignore[attr-defined]
spill_policy.inject = ()  # type: ignore[attr-defined]
spill_policy.Config = SpillConfig  # type: ignore[attr-defined]


# -- repeated identical calls (spec 05 §3.7) ------------------------------------------------------

FIRST_REMINDER = (
    "You are repeating the exact same tool call with identical arguments. Carefully analyze the previous result "
    "before calling again: if the task is not complete, try a different approach or different arguments instead "
    "of repeating the call."
)
LATER_REMINDER = (
    "Repeated tool call detected:\n- tool: {name}\n- consecutive_calls: {count}\n- arguments: {arguments}\n"
    "The repeated calls are not making progress. Do not call this tool with these exact arguments again. Inspect "
    "the latest result and choose a different action, different arguments, or finish the task if enough evidence "
    "has been gathered."
)


class ReminderConfig(BaseModel):
    """Run lengths that trigger a reminder, the preview length, and which tool names are tracked."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    thresholds: list[int] = Field(default=[3, 5, 8], min_length=1)
    argumentsPreviewChars: int = Field(default=500, ge=1)
    include: list[str] | None = None
    exclude: list[str] | None = None


def canonical_arguments(arguments: Any) -> str:
    """Compact JSON with keys sorted recursively (the raw text for unparsable arguments)."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _patterns(names: list[str] | None) -> re.Pattern[str] | None:
    if not names:
        return None
    return re.compile("|".join(re.escape(n).replace(r"\*", ".*") for n in names))


class RepeatTracker:
    """Per-agent run of identical consecutive calls."""

    def __init__(self, config: ReminderConfig) -> None:
        self.config = config
        self.thresholds = frozenset(config.thresholds)
        self.first = min(config.thresholds)
        self.include = _patterns(config.include)
        self.exclude = _patterns(config.exclude)
        self.runs: dict[str, tuple[str, str, int]] = {}

    def tracked(self, tool: str) -> bool:
        if self.include is not None and not self.include.fullmatch(tool):
            return False
        return self.exclude is None or not self.exclude.fullmatch(tool)

    def observe(self, owner: str, tool: str, arguments: Any) -> dict[str, Any] | None:
        """Count this call; the reminder message when the run just reached a threshold."""
        canonical = canonical_arguments(arguments)
        previous = self.runs.get(owner)
        count = previous[2] + 1 if previous is not None and previous[:2] == (tool, canonical) else 1
        self.runs[owner] = (tool, canonical, count)
        if count not in self.thresholds:
            return None
        if count == self.first:
            text = FIRST_REMINDER
        else:
            limit = self.config.argumentsPreviewChars
            preview = (
                canonical if len(canonical) <= limit else f"{canonical[:limit]}… (+{len(canonical) - limit} more chars)"
            )
            text = LATER_REMINDER.format(name=tool, count=count, arguments=preview)
        source = {"kind": "repeat-tool-reminder", "form": "notice", "summary": f"{tool} × {count}"}
        return user_message(text, source)


def repeat_tool_reminder(ctx: Context, config: ReminderConfig) -> None:
    """Queue a reminder for the next step when an agent repeats the same call; a user message resets the run."""
    tracker = RepeatTracker(config)

    async def listener(exec: ToolExec, next: Next[Settled]) -> Settled:
        outcome = await next()
        if not isinstance(outcome, ToolOutcome) or not tracker.tracked(exec.name):
            return outcome
        reminder = tracker.observe(owner_of(exec), exec.name, exec.arguments)
        if reminder is None:
            return outcome
        return replace(outcome, additional_contexts=[*outcome.additional_contexts, reminder])

    def on_event(session: Session, event: Event) -> None:
        if event["type"] == "user/message" and event["data"]["source"].get("kind") == "user":
            tracker.runs.pop(session.id, None)

    ctx.on(TOOL_POST_EXECUTE, listener, name="repeat-tool-reminder")
    ctx.on(SESSION_EVENT, on_event, global_=True)
    ctx.on(AGENT_DISPOSED, lambda payload: tracker.runs.pop(payload["agent"].id, None), global_=True)


repeat_tool_reminder.name = "repeat-tool-reminder"  # type: ignore[attr-defined]
repeat_tool_reminder.inject = ()  # type: ignore[attr-defined]
repeat_tool_reminder.Config = ReminderConfig  # type: ignore[attr-defined]
