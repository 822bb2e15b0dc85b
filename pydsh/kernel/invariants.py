"""Invariant companions: optional live checks that fail loudly (spec 01 §9).

A package registers an installer; when companions are enabled for it, the installer adds
listeners that call ``fail(message)`` on a violation. The test suite runs with all enabled.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict

from pydsh.kernel.context import Context

Installer = Callable[[Context, Callable[[str], NoReturn]], Any]


class InvariantError(AssertionError):
    """An invariant companion saw a violation."""

    code = "INVARIANT"

    def __init__(self, package_name: str, message: str) -> None:
        super().__init__(f"[{package_name}] {message}")
        self.package_name = package_name


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = False
    package_allowlist: list[str] = []
    package_blocklist: list[str] = []


class Invariants:
    """The ``invariants`` service: registry of companions, filtered by package name."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._allow = [re.compile(p) for p in config.package_allowlist]
        self._block = [re.compile(p) for p in config.package_blocklist]

    def enabled_for(self, package_name: str) -> bool:
        if not self.config.enabled:
            return False
        if self._allow and not any(p.search(package_name) for p in self._allow):
            return False
        return not any(p.search(package_name) for p in self._block)

    def register(self, ctx: Context, package_name: str, installer: Installer) -> None:
        """Install ``installer``'s listeners through ``ctx`` when enabled for the package."""
        if not self.enabled_for(package_name):
            return

        def fail(message: str) -> NoReturn:
            raise InvariantError(package_name, message)

        installer(ctx, fail)


name = "invariants"


def apply(ctx: Context, config: Config) -> None:
    ctx.provide("invariants", Invariants(config))
