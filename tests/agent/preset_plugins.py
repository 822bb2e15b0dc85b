"""Test plugins a preset row can name by import path."""

from __future__ import annotations

from typing import Any

from pydsh.kernel.context import Context
from pydsh.kernel.keys import ServiceKey

LATE: list[Context] = []


class Widget:
    """A service a preset row provides."""


def provider(ctx: Context, config: Any) -> None:
    ctx.provide(ServiceKey("widget"), Widget())


def late_provider(ctx: Context, config: Any) -> None:
    """Keeps its context so a test can publish a service after the preset was audited."""
    LATE.append(ctx)
