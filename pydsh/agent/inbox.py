"""The inbox: pending user input as a fold of ``agent/inbox/spliced`` events (spec 03 §3).

Two ordered lists — ``next-turn`` (prompts, one per turn) and ``next-step`` (steering and
injected context). Every mutation is one normalised durable event; the lists are never changed
any other way, so the log append is the only commit point and a resume rebuilds them exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydsh.agent.hooks import INBOX_CLAIMED, INBOX_DISCARDED, INBOX_INSERTED, InboxChange
from pydsh.contract.agent import Target, UserMessage
from pydsh.kernel.events import Emit
from pydsh.session.errors import SessionLogError
from pydsh.session.events import Event
from pydsh.session.log import Session

TARGETS: tuple[Target, Target] = ("next-turn", "next-step")


def normalise(start: float, delete_count: float, length: int) -> tuple[int, int]:
    """JavaScript ``Array.splice`` bounds: truncated, negative from the end, clamped."""
    begin = int(start)
    begin = max(length + begin, 0) if begin < 0 else min(begin, length)
    count = max(0, min(int(delete_count), length - begin))
    return begin, count


class InboxState:
    """Fold unit ``inbox`` (stateVersion 1): ``{"next-turn": [...], "next-step": [...]}``."""

    key = "inbox"

    def init(self) -> dict[str, list[UserMessage]]:
        return {"next-turn": [], "next-step": []}

    def fold(self, state: dict[str, list[UserMessage]], event: Event) -> dict[str, list[UserMessage]]:
        etype = event["type"]
        if etype == "session/end-seed" and event["data"].get("inherited"):
            return self.init()
        if etype != "agent/inbox/spliced":
            return state
        data = event["data"]
        items = state[data["target"]]
        start = data["start"]
        removed = data.get("removedCount", 0)
        if start > len(items) or start + removed > len(items):
            raise SessionLogError(event["seq"], f"invalid persisted inbox splice at session seq {event['seq']}")
        items[start : start + removed] = list(data["inserted"])
        return state


INBOX = InboxState()


class Inbox:
    """Mutations of an agent's pending input; notifications go through ``notify``."""

    def __init__(self, session: Session, notify: Callable[[Emit[InboxChange], UserMessage, int | None], None]) -> None:
        self._session = session
        self._notify = notify

    @property
    def _state(self) -> dict[str, list[UserMessage]]:
        return self._session.fold(INBOX)  # type: ignore[no-any-return]

    @property
    def next_turn(self) -> list[UserMessage]:
        return list(self._state["next-turn"])

    @property
    def next_step(self) -> list[UserMessage]:
        return list(self._state["next-step"])

    @property
    def has_pending(self) -> bool:
        state = self._state
        return bool(state["next-turn"] or state["next-step"])

    def _ids(self) -> set[str]:
        state = self._state
        return {m["id"] for lst in state.values() for m in lst}

    def splice(
        self,
        target: Target,
        start: float,
        delete_count: float,
        inserted: list[UserMessage],
        *,
        claim_turn: int | None = None,
    ) -> list[UserMessage]:
        """One normalised splice: validated first, then appended; returns the removed items."""
        if target not in TARGETS:
            raise ValueError(f"unknown inbox target {target!r}")
        items = self._state[target]
        begin, count = normalise(start, delete_count, len(items))
        if not count and not inserted:
            return []
        removed = items[begin : begin + count]
        taken = self._ids() - {m["id"] for m in removed}
        for message in inserted:
            if message["id"] in taken:
                raise ValueError(f'message "{message["id"]}" is already pending')
            taken.add(message["id"])
        data: dict[str, Any] = {"target": target, "start": begin}
        if count:
            data["removedCount"] = count
        data["inserted"] = inserted
        if count and claim_turn is None:
            data["outcome"] = "canceled"
        self._session.append("agent/inbox/spliced", data)
        for message in removed:
            if claim_turn is None:
                self._notify(INBOX_DISCARDED, message, None)
            else:
                self._notify(INBOX_CLAIMED, message, claim_turn)
        for message in inserted:
            self._notify(INBOX_INSERTED, message, None)
        return removed

    def append(self, target: Target, message: UserMessage) -> None:
        self.splice(target, len(self._state[target]), 0, [message])

    def prepend(self, target: Target, message: UserMessage) -> None:
        self.splice(target, 0, 0, [message])

    def _locate(self, message_id: str) -> tuple[Target, int] | None:
        for target in TARGETS:
            for i, message in enumerate(self._state[target]):
                if message["id"] == message_id:
                    return target, i
        return None

    def replace(self, message_id: str, message: UserMessage) -> bool:
        found = self._locate(message_id)
        if found is None:
            return False
        self.splice(found[0], found[1], 1, [message])
        return True

    def remove(self, message_id: str) -> bool:
        found = self._locate(message_id)
        if found is None:
            return False
        self.splice(found[0], found[1], 1, [])
        return True

    def clear(self) -> None:
        """Cancel everything pending: ``next-step`` first, then ``next-turn``."""
        for target in ("next-step", "next-turn"):
            self.splice(target, 0, len(self._state[target]), [])

    def claim(self, target: Target, turn: int) -> list[UserMessage]:
        """All ``next-step`` items and, at a turn boundary, the first ``next-turn`` item."""
        claimed = self.splice("next-step", 0, len(self._state["next-step"]), [], claim_turn=turn)
        if target == "next-turn":
            claimed += self.splice("next-turn", 0, 1, [], claim_turn=turn)
        return claimed
