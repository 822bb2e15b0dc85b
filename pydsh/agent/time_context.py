"""``time-context``: a logged time reading before model requests (spec 03 §10.4).

A prepended ``agent/pre-step`` listener appends one ``user/message`` (source ``time-context``,
form ``snapshot``) after the step's other messages: the wall clock in the browser's zone (the
unique ``clientTimeZone`` of the open turn's RPC prompts) or the configured/process zone, and the
time elapsed since the preceding model-visible message (step 1) or this turn's last reading. With
``refreshIntervalMs > 0`` a reading younger than the interval is not repeated. The state is the
``timeContext`` projection, a fold of the log, so a resumed session continues where it left off.
Mounted by the ``standard`` preset only; rosterless profiles log no time reading.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydsh.agent.hooks import PRE_STEP, PreStep, PreStepDecision
from pydsh.contract.agent import Agent, user_message
from pydsh.kernel.config import BaseModel, ConfigDict, Field, field_validator
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.session.events import Event
from pydsh.session.keys import SESSION_PROJECTIONS
from pydsh.session.projections import SessionProjections, Wire

KIND = "time-context"
IANA_ZONE = re.compile(r"^[A-Za-z][A-Za-z0-9_+.-]*(?:/[A-Za-z0-9_+.-]+)+$")
BROWSER = "Browser time zone for this request:"
STATE_KEYS = ("lastMessageTime", "lastInjectionTime", "lastTurnInjectionTime")


def load_zone(name: str) -> ZoneInfo:
    """The zone ``name`` (``UTC`` or an IANA ``Area/Location``); ``TypeError`` naming it otherwise."""
    if name != "UTC" and not IANA_ZONE.match(name):
        raise TypeError(f"time zone must be UTC or an IANA Area/Location name, got {name!r}")
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, ZoneInfoNotFoundError) as exc:
        raise TypeError(f"time zone {name!r} is unknown") from exc


def process_zone() -> str:
    """The process's IANA zone: ``$TZ`` when it names one, else ``/etc/localtime``'s target, else ``UTC``."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        candidates.append(target.split("zoneinfo/", 1)[1])
    for name in candidates:
        try:
            load_zone(name)
        except TypeError:
            continue
        return name
    return "UTC"


class Config(BaseModel):
    """``timeZone``: IANA zone of readings without a browser zone (default: the process zone)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    timeZone: str | None = None
    refreshIntervalMs: int = Field(default=600000, ge=0)

    @field_validator("timeZone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                load_zone(value)
            except TypeError as exc:
                raise ValueError(str(exc)) from None
        return value


def format_duration(elapsed_ms: int) -> str:
    """Whole seconds as ``[<d>d ][<h>h ][<m>m ]<s>s`` (zero units omitted, seconds always present)."""
    seconds = max(0, elapsed_ms) // 1000
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    parts = [f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m")) if v > 0]
    return " ".join([*parts, f"{seconds}s"])


def format_timestamp(now_ms: int, zone: str) -> str:
    """``YYYY-MM-DDTHH:MM:SS±HH:MM[Zone]`` of ``now_ms`` in ``zone``."""
    moment = datetime.fromtimestamp(now_ms / 1000, ZoneInfo(zone))
    offset = moment.strftime("%z")
    return f"{moment.strftime('%Y-%m-%dT%H:%M:%S')}{offset[:3]}:{offset[3:]}[{zone}]"


def browser_zones(messages: list[dict[str, Any]]) -> list[str]:
    """The sorted distinct ``clientTimeZone`` values of RPC-sourced user prompts (each validated)."""
    zones: set[str] = set()
    for message in messages:
        source = message.get("source") or {}
        zone = source.get("clientTimeZone")
        if source.get("kind") == "user" and isinstance(source.get("rpcId"), str) and isinstance(zone, str):
            load_zone(zone)
            zones.add(zone)
    return sorted(zones)


def browser_line(zones: list[str]) -> str:
    """The reading's second line for the open turn's browser zones."""
    if len(zones) == 1:
        return f"{BROWSER} {zones[0]}. Interpret otherwise-unqualified dates and times in this zone."
    listed = f"mixed {json.dumps(zones, separators=(',', ':'))}" if zones else "unavailable"
    return f"{BROWSER} {listed}. Ask the user to clarify otherwise-unqualified dates and times."


def reading_text(now_ms: int, turn: int, step: int, previous: int | None, *, zone: str, zones: list[str]) -> str:
    """The three lines of one reading (spec 03 §10.4, exact)."""
    elapsed = "unavailable" if previous is None else format_duration(now_ms - previous)
    baseline = "model-visible message" if step == 1 else "step context"
    return (
        f"Time sampled while preparing turn {turn}, step {step}: {format_timestamp(now_ms, zone)}\n"
        f"{browser_line(zones)}\n"
        f"Elapsed since the preceding {baseline}: {elapsed}."
    )


def reading_message(text: str) -> dict[str, Any]:
    """The logged user message carrying one reading."""
    return user_message(text, {"kind": KIND, "form": "snapshot", "sections": [{"name": KIND, "text": text}]})


class TimeContextUnit:
    """Session projection ``timeContext``: times of the last model-visible message and readings."""

    key = "timeContext"
    state_version = 2
    wire: Wire | None = None

    def state_schema(self, raw: object) -> dict[str, int | None]:
        if not isinstance(raw, dict) or set(raw) != set(STATE_KEYS):
            raise TypeError(f"timeContext state must be a mapping of {', '.join(STATE_KEYS)}")
        return raw

    def init(self, header: dict[str, Any], inherited_event_count: int) -> dict[str, int | None]:
        return dict.fromkeys(STATE_KEYS)

    def apply(self, state: dict[str, int | None], event: Event) -> dict[str, int | None]:
        kind = event["type"]
        if kind in ("turn/start", "turn/end"):
            return state if state["lastTurnInjectionTime"] is None else {**state, "lastTurnInjectionTime": None}
        if kind not in ("user/message", "assistant/message", "tool/result"):
            return state
        moment = event["time"]
        out = state if state["lastMessageTime"] == moment else {**state, "lastMessageTime": moment}
        if kind == "user/message" and (event["data"].get("source") or {}).get("kind") == KIND:
            out = {**out, "lastInjectionTime": moment, "lastTurnInjectionTime": moment}
        return out


def open_turn_messages(agent: Agent, turn: int, proposed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """User messages entered since this turn's ``turn/start``, then the step's proposed ones."""
    entered: list[dict[str, Any]] = []
    for event in reversed(agent.session.events):
        if event["type"] == "turn/start" and event["data"].get("turn") == turn:
            break
        if event["type"] == "user/message":
            entered.append(event["data"])
    return [*reversed(entered), *proposed]


name = "time-context"
inject = (SESSION_PROJECTIONS,)


def apply(ctx: Context, config: Config) -> None:
    """Register the ``timeContext`` unit and the prepended pre-step listener."""
    projections: SessionProjections = ctx.require(SESSION_PROJECTIONS)
    unit = TimeContextUnit()
    projections.register(ctx, unit)
    fallback = config.timeZone or process_zone()
    interval = config.refreshIntervalMs

    async def on_pre_step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        decision = await nxt()
        if decision.get("kind") == "reject" or payload["signal"].aborted:
            return decision
        agent: Agent = payload["agent"]
        messages = list(decision.get("messages") or [])
        if payload["step"] == 1 and not messages:
            return decision
        now = time.time_ns() // 1_000_000
        state = projections.state_of(agent.session, unit.key) or unit.init({}, 0)
        last = state["lastInjectionTime"]
        if interval > 0 and last is not None and 0 <= now - last < interval:
            return decision
        turn, step = payload["turn"], payload["step"]
        previous = state["lastMessageTime"] if step == 1 else state["lastTurnInjectionTime"]
        zones = browser_zones(open_turn_messages(agent, turn, messages))
        zone = zones[0] if len(zones) == 1 else fallback
        text = reading_text(now, turn, step, previous, zone=zone, zones=zones)
        return {**decision, "messages": [*messages, reading_message(text)]}

    ctx.on(PRE_STEP, on_pre_step, name="time-context")
