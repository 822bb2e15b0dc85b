"""Cross-cutting tool policies: read-before-write observations, spill of large results, repeat reminders.

Each is a function plugin (spec 05 §3.6–3.8) that the composition can drop by deleting its row.
"""

from __future__ import annotations

from typing import Any

from pydsh.kernel.context import Context
from pydsh.kernel.events import define_event

define_event("agent/disposed", "emit")


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
    ctx.provide("fs_observations", observations)
    ctx.on("agent/disposed", lambda payload: observations.forget(payload["agent"].id), global_=True)


fs_observation_policy.name = "fs-observation-policy"  # type: ignore[attr-defined]
fs_observation_policy.inject = ()  # type: ignore[attr-defined]
fs_observation_policy.Config = None  # type: ignore[attr-defined]
