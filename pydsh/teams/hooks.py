"""The bus events of the ``teams`` package."""

from __future__ import annotations

from pydsh.kernel.events import Emit

ROUTES_CHANGED: Emit[str] = Emit(
    "team/routes-changed", "a teammate's selected route changed (the team id); emitted by the route provider"
)
