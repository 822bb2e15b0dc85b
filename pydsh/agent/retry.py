"""The ``llm-retry`` plugin (spec 04 §7.2): answers ``agent/request-error`` with a logged, cancellable backoff.

The policy comes from the failed call's provider (``pydsh.llm.retry``); each retry is logged as
``llm/retry`` before the wait and ``llm/retry-started`` after it, so a resumed session counts on.
"""

from __future__ import annotations

import asyncio
import json
import math
import random as random_module
from collections.abc import Awaitable, Callable
from typing import Any

from pydsh.agent.hooks import REQUEST_ERROR, RequestError, RetryAnswer
from pydsh.kernel.cancel import NEVER, AbortError, AbortSignal
from pydsh.kernel.config import BaseModel, ConfigDict, model_validator
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.llm.retry import RetryPolicyConfig


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

    async def __call__(self, payload: RequestError, next: Next[RetryAnswer | None]) -> RetryAnswer | None:
        raw = payload["retryPolicy"]
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
        provider = payload["provider"]
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
        signal: AbortSignal = payload["signal"] or NEVER
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
    ctx.on(REQUEST_ERROR, RetryHandler(), name="llm-retry")


def _new_retry_id() -> str:
    """A fresh random retry id (``uuid`` loads on first use, not at start-up)."""
    import uuid

    return str(uuid.uuid4())
