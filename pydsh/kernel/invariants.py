"""Invariant companions: optional live checks that fail loudly (spec 01 §9).

A package registers an installer; when companions are enabled for it, the installer adds
listeners that call ``fail(message)`` on a violation. The test suite runs with all enabled.
A violation is raised, and also recorded, so that code which catches the raise cannot hide it:
in the process-wide list :func:`drain` returns (the test suite asserts it stays empty), in the
optional ``report`` file (one line each, so a parent process sees its children's violations),
and at shutdown, where a host that recorded any fails its dispose.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.errors import PydshError
from pydsh.kernel.keys import INVARIANTS

if TYPE_CHECKING:
    from pydsh.kernel.context import Context

Installer = Callable[["Context", Callable[[str], NoReturn]], Any]


class InvariantError(PydshError, AssertionError):
    """An invariant companion saw a violation."""

    code = "INVARIANT"

    def __init__(self, package_name: str, message: str) -> None:
        super().__init__(f"[{package_name}] {message}")
        self.package_name = package_name


_recorded: list[InvariantError] = []


def drain() -> list[InvariantError]:
    """Every violation recorded in this process since the last call, oldest first; clears the list."""
    out = list(_recorded)
    _recorded.clear()
    return out


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = False
    package_allowlist: list[str] = Field(default_factory=list)
    package_blocklist: list[str] = Field(default_factory=list)
    report: str = ""


class Invariants:
    """The ``invariants`` service: registry of companions, filtered by package name."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._allow = [re.compile(p) for p in config.package_allowlist]
        self._block = [re.compile(p) for p in config.package_blocklist]
        self.violations: list[InvariantError] = []

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
            raise self.record(InvariantError(package_name, message))

        installer(ctx, fail)

    def record(self, error: InvariantError) -> InvariantError:
        """Keep ``error`` here, in the process-wide list and in the report file; returns it for raising."""
        self.violations.append(error)
        _recorded.append(error)
        if self.config.report:
            with Path(self.config.report).open("a", encoding="utf-8") as report:
                report.write(f"{error}\n")
        return error

    def check_clean(self) -> None:
        """Raise the first recorded violation (the shutdown check: a violating host fails to close)."""
        if self.violations:
            count = len(self.violations)
            raise InvariantError("invariants", f"{count} violation(s) recorded, first: {self.violations[0]}")


name = "invariants"


def apply(ctx: Context, config: Config) -> None:
    service = Invariants(config)
    ctx.provide(INVARIANTS, service)
    ctx.effect(lambda: service.check_clean)
