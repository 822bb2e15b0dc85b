"""Retry policies (spec 04 §7.1): each provider configuration carries a ``retryPolicy``, validated here.

The ``llm-retry`` plugin that acts on them when a step's model call fails is ``pydsh.agent.retry``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydsh.kernel.config import BaseModel, ConfigDict, Field, field_validator, model_validator

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
