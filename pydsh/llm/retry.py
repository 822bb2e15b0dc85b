"""Retry policies and the ``llm-retry`` plugin (spec 04 §7).

Each provider configuration carries a ``retryPolicy``; this module validates it and answers the
``agent/request-error`` waterfall with a logged, cancellable backoff.
"""

from __future__ import annotations

import asyncio
import json
import math
import random as random_module
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydsh.kernel.cancel import NEVER, AbortError, AbortSignal
from pydsh.kernel.config import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydsh.kernel.context import Context
from pydsh.kernel.events import define_event

define_event("agent/request-error", "waterfall")

DEFAULT_CODES = ("EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT")


class Backoff(BaseModel):
    """Exponential backoff with symmetric jitter."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    initialDelayMs: int | float = Field(default=500, ge=0)
    maxDelayMs: int | float = Field(default=10000, ge=0)
    jitterRatio: int | float = Field(default=0.1, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> Backoff:
        if self.maxDelayMs < self.initialDelayMs:
            raise ValueError("maxDelayMs must be at least initialDelayMs")
        return self


class RetryPolicyConfig(BaseModel):
    """A provider's ``retryPolicy`` (``normal`` or ``always`` mode)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["normal", "always"] = "normal"
    maxRetries: int = Field(default=5, ge=0)
    retryableCodes: tuple[str, ...] = DEFAULT_CODES
    backoff: Backoff = Field(default_factory=Backoff)

    @field_validator("retryableCodes")
    @classmethod
    def _codes(cls, codes: tuple[str, ...]) -> tuple[str, ...]:
        if not codes:
            raise ValueError("retryableCodes must not be empty")
        if len(set(codes)) != len(codes):
            raise ValueError("retryableCodes must be unique")
        return codes

    def policy(self) -> dict[str, Any]:
        """The materialised policy dict handed to the loop through ``PreparedCall.retry_policy``."""
        backoff = self.backoff.model_dump()
        if self.mode == "always":
            return {"mode": "always", "backoff": backoff}
        return {
            "mode": "normal",
            "maxRetries": self.maxRetries,
            "retryableCodes": list(self.retryableCodes),
            "backoff": backoff,
        }


def default_policy() -> dict[str, Any]:
    """The normal-mode defaults."""
    return RetryPolicyConfig().policy()


# -- the llm-retry plugin --------------------------------------------------------------------


def _num(value: float) -> float:
    """Integral floats as ints, so logged numbers read like the reference's JSON."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def policy_key(policy: RetryPolicyConfig) -> str:
    """The compact JSON identity of a policy (spec 04 §7.2 step 2)."""
    b = policy.backoff
    backoff = [_num(b.initialDelayMs), _num(b.maxDelayMs), _num(b.jitterRatio)]
    if policy.mode == "always":
        key: list[Any] = ["always", *backoff]
    else:
        key = ["normal", policy.maxRetries, sorted(policy.retryableCodes), *backoff]
    return json.dumps(key, separators=(",", ":"))


class RetryState:
    """Projection unit ``llmRetry``: ``json([provider, policyKey])`` → ``{retry, retryId}``, per step."""

    key = "llmRetry"

    def init(self) -> dict[str, dict[str, Any]]:
        return {}

    def fold(self, state: dict[str, dict[str, Any]], event: dict[str, Any]) -> dict[str, dict[str, Any]]:
        etype = event["type"]
        if etype in ("step/start", "turn/end"):
            return {}
        if etype == "llm/retry":
            data = event["data"]
            slot = json.dumps([data.get("provider"), data.get("policyKey")], separators=(",", ":"))
            return {**state, slot: {"retry": data.get("retry"), "retryId": data.get("retryId")}}
        return state


RETRY_STATE = RetryState()


class RetryHandler:
    """The ``agent/request-error`` listener; ``random`` and ``sleep`` are injectable for tests."""

    def __init__(
        self,
        *,
        random: Callable[[], float] = random_module.random,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.random = random
        self.sleep = sleep

    def local_delay(self, policy: RetryPolicyConfig, retry: int) -> float:
        """``min(min(initial·2^(retry−1), max) · (1 − j + 2j·random()), max)`` in ms."""
        b = policy.backoff
        j = b.jitterRatio
        base = min(b.initialDelayMs * 2 ** (retry - 1), b.maxDelayMs)
        return float(min(base * (1 - j + 2 * j * self.random()), b.maxDelayMs))

    async def __call__(self, payload: dict[str, Any], next: Callable[[], Awaitable[Any]]) -> Any:
        raw = payload.get("retryPolicy")
        failure = payload["failure"]
        if not raw:
            return await next()
        policy = RetryPolicyConfig.model_validate(raw)
        if policy.mode == "normal" and failure.get("code") not in policy.retryableCodes:
            return await next()
        if policy.mode == "always":
            answer = await next()
            if answer is not None:
                return answer
        session = payload["agent"].session
        provider = payload.get("provider")
        key = policy_key(policy)
        previous = session.fold(RETRY_STATE).get(json.dumps([provider, key], separators=(",", ":")))
        done = previous["retry"] if previous else 0
        if policy.mode == "normal" and done >= policy.maxRetries:
            return await next()
        retry = done + 1
        retry_id = previous["retryId"] if previous else _new_retry_id()
        delay = self._delay(policy, retry, failure.get("providerRetryAfterMs"))
        if delay is None:
            return await next()
        record: dict[str, Any] = {"retryId": retry_id, "turn": payload["turn"], "step": payload["step"]}
        record |= {"provider": provider, "mode": policy.mode, "policyKey": key, "retry": retry}
        if policy.mode == "normal":
            record["maxRetries"] = policy.maxRetries
        record |= {"delayMs": _num(delay), "failure": failure}
        session.append("llm/retry", record)
        signal: AbortSignal = payload.get("signal") or NEVER
        try:
            async with signal.scope():
                await self.sleep(delay / 1000)
        except AbortError:
            return None
        session.append(
            "llm/retry-started", {"retryId": retry_id, "turn": payload["turn"], "step": payload["step"], "retry": retry}
        )
        return {"kind": "retry"}

    def _delay(self, policy: RetryPolicyConfig, retry: int, after: object) -> float | None:
        """The wait before ``retry`` (``None``: a normal policy gives up on a too-long Retry-After)."""
        if isinstance(after, (int, float)) and not isinstance(after, bool) and math.isfinite(after) and after > 0:
            if after <= policy.backoff.maxDelayMs:
                return float(after)
            if policy.mode == "normal":
                return None
        return self.local_delay(policy, retry)


class Config(BaseModel):
    """``llm-retry`` takes no configuration: policies live with each provider."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_policy_here(cls, data: Any) -> Any:
        if isinstance(data, dict) and "retryPolicy" in data:
            raise ValueError("llm-retry: retryPolicy belongs under each provider configuration")
        return data


name = "llm-retry"


def apply(ctx: Context, config: Config) -> None:
    """Answer retryable request errors with a logged, cancellable backoff."""
    ctx.on("agent/request-error", RetryHandler())


def _new_retry_id() -> str:
    """A fresh random retry id (``uuid`` loads on first use, not at start-up)."""
    import uuid

    return str(uuid.uuid4())
