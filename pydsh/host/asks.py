"""What an approval ask is about, read from the asking session's log (every interactive frontend shows it)."""

from __future__ import annotations

import json
from typing import Any

Event = dict[str, Any]


def open_ask(events: list[Event], tool_name: str, call_id: str | None) -> str | None:
    """The id of the newest ``approval/asked`` of this call not yet decided."""
    decided: set[str] = set()
    for event in reversed(events):
        if event["type"] == "approval/decided":
            decided.add(event["data"]["id"])
        elif event["type"] == "approval/asked":
            data = event["data"]
            if data["id"] not in decided and data["toolName"] == tool_name and data.get("callId") == call_id:
                return str(data["id"])
    return None


def call_arguments(events: list[Event], call_id: str | None) -> Any:
    """The parsed arguments of the ``tool/call`` with ``call_id`` (its raw text if not JSON)."""
    if call_id is None:
        return None
    for event in reversed(events):
        if event["type"] == "tool/call" and event["data"].get("callId") == call_id:
            raw = event["data"].get("arguments")
            try:
                return json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                return raw
    return None
