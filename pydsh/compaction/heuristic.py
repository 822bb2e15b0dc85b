"""The fixed token heuristic (spec 10 §2.4): prices of blocks, messages, system prompts and tools.

Lengths count UTF-16 code units and JSON is compact with non-ASCII kept, so the numbers equal
the reference's (the shadow prices logged by compaction depend on it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydsh.kernel.text import utf16_len
from pydsh.session.surface import derive_event_message


def _ceil4(n: int) -> int:
    return -(-n // 4)


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def price_block(block: Mapping[str, Any]) -> int:
    """``text``/``reasoning``: text; ``tool-call``: name and arguments; others: their JSON."""
    btype = block.get("type")
    if btype in ("text", "reasoning") and isinstance(block.get("text"), str):
        return _ceil4(utf16_len(block["text"])) + 4
    if btype == "tool-call":
        return _ceil4(utf16_len(str(block.get("name", "")))) + _ceil4(utf16_len(str(block.get("arguments", "")))) + 4
    if btype == "image" and "offloaded" in block:
        block = {k: v for k, v in block.items() if k != "offloaded"}
    return 4 + _ceil4(utf16_len(compact_json(block)))


def price_blocks(blocks: Iterable[Mapping[str, Any]]) -> int:
    return sum(price_block(b) for b in blocks)


def price_message(message: Mapping[str, Any]) -> int:
    """A non-system message: its blocks plus 4."""
    return price_blocks(message.get("content") or ()) + 4


def price_system(message: Mapping[str, Any]) -> int:
    """A system message: 0 when empty, else its characters (text, or JSON of other blocks) / 4 + 4."""
    content = message.get("content") or ()
    if not content:
        return 0
    chars = 0
    for block in content:
        text = block.get("text")
        chars += (
            utf16_len(text) if block.get("type") == "text" and isinstance(text, str) else utf16_len(compact_json(block))
        )
    return _ceil4(chars) + 4


def tools_tokens(tools: Any) -> int:
    """The request tools: 0 when none, else their JSON / 4 + 4."""
    if not tools:
        return 0
    return _ceil4(utf16_len(compact_json(tools))) + 4


def price_event(event: Mapping[str, Any]) -> int:
    """Price of one surface event as the model sees it (0 when it derives no message)."""
    if event["type"] == "system/message":
        return price_system(event["data"]["message"])
    message = derive_event_message(event)  # type: ignore[arg-type]
    return 0 if message is None else price_message(message)


def estimate_message(message: Mapping[str, Any]) -> int:
    """Heuristic price of one message, by role."""
    return price_system(message) if message.get("role") == "system" else price_message(message)
