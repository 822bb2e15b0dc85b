"""Reading and validating ``source.replayState`` when rendering history (spec 04 §2.6, §4.10).

An envelope that does not fit its message is never an error: the message is rendered
provider-neutrally and one WARNING per route says why (``INVALID_REPLAY_STATE`` internally).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("pydsh.llm.replay")


def envelope_problem(state: object, content: list[dict[str, Any]], kind: str, version: int) -> str | None:
    """Why ``state`` is unusable for a message with ``content`` (``None`` when it fits)."""
    if not isinstance(state, dict):
        return "replay state is not an object"
    response = state.get("response")
    if not isinstance(response, dict) or response.get("kind") != kind or response.get("version") != version:
        return f"replay state is not {kind} v{version}"
    model = response.get("model")
    if not isinstance(model, str) or not model:
        return "replay state names no served model"
    blocks = state.get("blocks")
    if not isinstance(blocks, list) or len(blocks) != len(content):
        return "replay blocks do not align with the message content"
    for entry, block in zip(blocks, content, strict=True):
        if not isinstance(entry, dict) or entry.get("type") != block.get("type"):
            return "replay block types differ from the message content"
        if "signature" in entry and (entry["type"] != "reasoning" or not isinstance(entry["signature"], str)):
            return "replay signature is not a string on a reasoning block"
    return None


class ReplayReader:
    """Validates envelopes of one adapter's kind, warning once per route about unusable ones."""

    __slots__ = ("kind", "version", "_warned")

    def __init__(self, kind: str, version: int) -> None:
        self.kind = kind
        self.version = version
        self._warned: set[str] = set()

    def read(self, message: dict[str, Any], route: str) -> tuple[str, list[dict[str, Any]]] | None:
        """``(served model, blocks)`` of a usable envelope on ``message``, else ``None``."""
        source = message.get("source")
        if not isinstance(source, dict) or "replayState" not in source:
            return None
        state = source["replayState"]
        problem = envelope_problem(state, message.get("content") or [], self.kind, self.version)
        if problem is not None:
            if route not in self._warned:
                self._warned.add(route)
                log.warning("INVALID_REPLAY_STATE on route %s: %s; rendering without it", route, problem)
            return None
        return state["response"]["model"], state["blocks"]
