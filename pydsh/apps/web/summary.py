"""What the sidebar and the usage footer need of one session, folded from its events (spec 12 §4.1)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from pydsh.compaction.meter import usage_total
from pydsh.session.events import Event


def workspace_id(path: str) -> str:
    """A stable id of a workspace folder (the first 16 hex digits of its path's SHA-256)."""
    return hashlib.sha256(path.encode()).hexdigest()[:16]


@dataclass
class SummaryFold:
    """Counters and last-wins values of one session, advanced event by event."""

    turns: int = 0
    steps: int = 0
    tokens: int = 0
    updated_at: int = 0
    last_seq: int = -1
    model: dict[str, Any] = field(default_factory=dict)
    permission_preset: str | None = None
    todos: list[dict[str, Any]] = field(default_factory=list)

    def apply(self, event: Event) -> None:
        etype = event["type"]
        data = event.get("data") or {}
        self.last_seq = event["seq"]
        self.updated_at = max(self.updated_at, int(event.get("time") or 0))
        if etype == "turn/start":
            self.turns += 1
        elif etype == "step/start":
            self.steps += 1
        elif etype == "assistant/message" and isinstance(data.get("usage"), dict):
            self.tokens += usage_total(data["usage"])
        elif etype == "request/header":
            config = data["header"]["config"]
            self.model = _route(config.get("provider"), config.get("model"), config.get("reasoningEffort"))
        elif etype == "model/selection" and isinstance(data, dict) and data.get("model"):
            self.model = _route(data.get("provider"), data.get("model"), data.get("reasoningEffort"))
        elif etype == "permission/preset":
            self.permission_preset = data.get("preset")
        elif etype == "todo/write":
            self.todos = list(data.get("todos") or [])

    def stats(self) -> dict[str, int]:
        return {"turns": self.turns, "steps": self.steps, "tokens": self.tokens}


def _route(provider: Any, model: Any, effort: Any) -> dict[str, Any]:
    route: dict[str, Any] = {"provider": provider, "model": model}
    if effort:
        route["effort"] = effort
    return route


def fold_events(events: list[Event]) -> SummaryFold:
    fold = SummaryFold()
    for event in events:
        fold.apply(event)
    return fold
