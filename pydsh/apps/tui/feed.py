"""A session log as the blocks of the terminal's transcript: prompts, answers, reasoning, tool cards,
messages from other agents and notices. Pure Python (no Textual), so a resumed log of any length is
folded once and the screen mounts only the blocks it shows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

Event = dict[str, Any]

MESSAGE_KINDS = frozenset({"agent-message", "team-message", "dsh-agent-message", "subagent-settled"})
"""Sources of user-role messages written by other agents: shown as "From <name>" cards."""
RELAY = re.compile(r"^Agent (\S+) sent a message: ?")
TEAM = re.compile(r"^Team message from ([^:\n]+):\s*")
DSH = re.compile(r"^<dsh-agent-message>[^\n]*</dsh-agent-message>\n\n")
SETTLED = re.compile(r"subagent (\S+?) (finished|failed|stopped|ran out|was declined|declined)", re.IGNORECASE)
ENDINGS = {
    "aborted": "Stopped.",
    "cancelled": "Stopped.",
    "max-tokens": "The answer hit the model's output limit.",
    "refusal": "The model declined.",
    "blocked": "The turn was blocked.",
}


@dataclass
class Block:
    """One item of the transcript; ``key`` is stable while it changes (a streaming answer, a tool card)."""

    key: str
    kind: str
    """``user``, ``text``, ``reasoning``, ``tool``, ``message`` or ``notice``."""
    text: str = ""
    title: str = ""
    """A tool's name, a message's sender, a notice's tone (``error`` or ``info``)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    result: str | None = None
    error: bool = False
    version: int = 0
    """Bumped on every change, so the screen redraws only what changed."""


def text_of(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message.get("content", ()) if b.get("type") == "text")


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict (``{"_raw": text}`` when they are not a JSON object)."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"_raw": str(raw)}


def sender(message: dict[str, Any]) -> tuple[str, str]:
    """The sender's name and the body of another agent's message, without the framing the model reads."""
    source = message.get("source") or {}
    text = text_of(message)
    kind = source.get("kind")
    if kind == "dsh-agent-message":
        return str(source.get("senderTitle") or source.get("senderSessionId") or "another session"), DSH.sub("", text)
    team = TEAM.match(text)
    if team is not None:
        return team[1].strip(), text[team.end() :]
    if kind == "subagent-settled":
        settled = SETTLED.search(text)
        name = settled[1] if settled else str(source.get("senderName") or "subagent")
        closing = text.split("Its closing message:", 1)
        return name, closing[1].strip() if len(closing) == 2 else text
    relay = RELAY.match(text)
    if relay is not None:
        return relay[1], text[relay.end() :]
    return str(source.get("senderName") or "another agent"), text


class Feed:
    """The blocks of one session, kept current event by event and delta by delta."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._by_key: dict[str, Block] = {}
        self._streaming: dict[str, str] = {}
        """The delta kind (``text`` or ``reasoning``) → key of the block it is streaming into."""
        self._step = (0, 0)
        self.last_seq = -1
        self._turns = 0

    def _add(self, block: Block) -> Block:
        self.blocks.append(block)
        self._by_key[block.key] = block
        return block

    def _change(self, block: Block, **values: Any) -> Block:
        for name, value in values.items():
            setattr(block, name, value)
        block.version += 1
        return block

    def get(self, key: str) -> Block | None:
        return self._by_key.get(key)

    def apply_all(self, events: list[Event]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, event: Event) -> list[Block]:
        """Fold one log event; the blocks it added or changed."""
        if event["seq"] <= self.last_seq:
            return []
        self.last_seq = event["seq"]
        handler = HANDLERS.get(event["type"])
        return handler(self, event["data"], event["seq"]) if handler is not None else []

    def delta(self, kind: str, text: str) -> list[Block]:
        """A live piece of the answer (``text-delta``) or of its reasoning (``reasoning-delta``)."""
        name = "reasoning" if kind == "reasoning-delta" else "text"
        key = self._streaming.get(name)
        block = self._by_key.get(key) if key is not None else None
        if block is None:
            key = f"live-{name}-{len(self.blocks)}"
            self._streaming[name] = key
            block = self._add(Block(key, name))
        return [self._change(block, text=block.text + text)]

    # -- handlers ---------------------------------------------------------------------------------

    def _user(self, data: dict[str, Any], seq: int) -> list[Block]:
        kind = (data.get("source") or {}).get("kind")
        if kind == "user":
            return [self._add(Block(f"u{seq}", "user", text_of(data)))]
        if kind in MESSAGE_KINDS:
            name, body = sender(data)
            return [self._add(Block(f"m{seq}", "message", body, title=name))]
        return []

    def _assistant(self, data: dict[str, Any], seq: int) -> list[Block]:
        message = data["message"]
        reasoning = "".join(b.get("text", "") for b in message.get("content", ()) if b.get("type") == "reasoning")
        text = text_of(message)
        changed = []
        for name, value in (("reasoning", reasoning), ("text", text)):
            key = self._streaming.pop(name, None)
            block = self._by_key.get(key) if key is not None else None
            if block is not None:
                changed.append(self._change(block, text=value))
            elif value.strip():
                changed.append(self._add(Block(f"{name[0]}{seq}", name, value)))
        return changed

    def _call(self, data: dict[str, Any], seq: int) -> list[Block]:
        block = Block(
            f"c{data['callId']}", "tool", title=str(data["name"]), arguments=parse_arguments(data["arguments"])
        )
        return [self._add(block)]

    def _result(self, data: dict[str, Any], seq: int) -> list[Block]:
        message = data["message"]
        block = self._by_key.get(f"c{message['toolCallId']}")
        if block is None:
            return []
        return [self._change(block, result=text_of(message), error=bool(message.get("isError")))]

    def _turn_end(self, data: dict[str, Any], seq: int) -> list[Block]:
        self._streaming.clear()
        reason = data["reason"]
        kind = reason["kind"]
        if kind == "error":
            error = reason.get("error") or {}
            text = f"Error: {error.get('message') or error.get('code') or 'the turn failed'}"
            return [self._add(Block(f"n{seq}", "notice", text, title="error"))]
        ending = ENDINGS.get(kind)
        return [self._add(Block(f"n{seq}", "notice", ending, title="info"))] if ending else []

    def _command(self, data: dict[str, Any], seq: int) -> list[Block]:
        tone = "error" if data.get("kind") == "error" else "info"
        return [self._add(Block(f"n{seq}", "notice", f"/compact: {data.get('text', data.get('kind'))}", title=tone))]

    def _compacted(self, data: dict[str, Any], seq: int) -> list[Block]:
        text = f"Compacted {len(data['shadowedSeqs'])} messages into a checkpoint."
        return [self._add(Block(f"n{seq}", "notice", text, title="info"))]

    def _model(self, data: dict[str, Any], seq: int) -> list[Block]:
        effort = f" ({data['reasoningEffort']})" if data.get("reasoningEffort") else ""
        text = f"Model: {data['provider']}/{data['model']}{effort} from the next step."
        return [self._add(Block(f"n{seq}", "notice", text, title="info"))]

    def _turn_start(self, data: dict[str, Any], seq: int) -> list[Block]:
        self._turns += 1
        return []

    def _preset(self, data: dict[str, Any], seq: int) -> list[Block]:
        if not self._turns:
            return []
        return [self._add(Block(f"n{seq}", "notice", f"Permission mode: {data['preset']}.", title="info"))]


HANDLERS = {
    "user/message": Feed._user,
    "assistant/message": Feed._assistant,
    "tool/call": Feed._call,
    "tool/result": Feed._result,
    "turn/end": Feed._turn_end,
    "command/done": Feed._command,
    "compaction/summary": Feed._compacted,
    "model/selection": Feed._model,
    "permission/preset": Feed._preset,
    "turn/start": Feed._turn_start,
}
