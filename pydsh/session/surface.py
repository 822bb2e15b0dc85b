"""The surface: which events currently produce model messages, and the derived history (spec 02 §7–§8).

Appends extend the cached message list (and the list of system nodes) in O(new nodes); a replace bumps
the generations and rebuilds them. ``derive_messages`` returns a fresh list of the shared (frozen) messages.
"""

from __future__ import annotations

from typing import Any

from pydsh.session.events import Event

_MESSAGE_IN_DATA = frozenset({"system/message", "developer/message", "assistant/message", "tool/result"})
_SKIP_WHEN_EMPTY = frozenset({"system/message", "developer/message", "assistant/message"})


def derive_event_message(event: Event) -> dict[str, Any] | None:
    """The model message one surface event projects to, or ``None`` (spec 02 §8)."""
    etype = event["type"]
    if etype == "user/message":
        return event["data"]  # type: ignore[no-any-return]
    if etype in _MESSAGE_IN_DATA:
        message = event["data"]["message"]
        if etype in _SKIP_WHEN_EMPTY and not message.get("content"):
            return None
        return message  # type: ignore[no-any-return]
    return None


class Surface:
    """Current surface nodes (event seqs, in surface order) over a shared event list."""

    def __init__(self, events: list[Event]) -> None:
        self._events = events
        self.nodes: list[int] = []
        self.replace_generation = 0
        self.content_generation = 0
        self._messages: list[dict[str, Any]] = []
        self._cached_nodes = 0
        self._system: list[int] = []
        self._system_scanned = 0

    def check(self, event: Event) -> str | None:
        """What is wrong with ``event`` as the next surface event, or ``None``."""
        seq = event["seq"]
        op = event.get("surfaceOp")
        sources = event.get("sourceEventSeqs")
        if sources is not None:
            problem = self._sources_problem(sources, seq)
            if problem:
                return problem
            if event["type"] == "assistant/message":
                return "assistant/message must not carry sourceEventSeqs"
        if op == "append":
            return None
        if not isinstance(op, dict) or op.get("op") != "replace" or set(op) != {"op", "startSeq", "endSeq"}:
            return f"surfaceOp {op!r} is neither append nor a replace"
        return self._replace_problem(event, op, sources)

    @staticmethod
    def _sources_problem(sources: Any, seq: int) -> str | None:
        if not isinstance(sources, list) or not sources:
            return "sourceEventSeqs must be a non-empty list"
        if any(type(s) is not int or s < 0 or s >= seq for s in sources):
            return "sourceEventSeqs must name earlier events"
        if len(set(sources)) != len(sources):
            return "sourceEventSeqs must be unique"
        return None

    def _replace_problem(self, event: Event, op: dict[str, Any], sources: Any) -> str | None:
        start, end = op.get("startSeq"), op.get("endSeq")
        if start not in self.nodes or end not in self.nodes:
            return f"replace {start}..{end} does not name current surface nodes"
        first, last = self.nodes.index(start), self.nodes.index(end)
        if first > last:
            return f"replace start {start} comes after end {end} on the surface"
        shadowed = self.nodes[first : last + 1]
        if sources is None or not set(shadowed) <= set(sources):
            return "a replace must cite every shadowed node in sourceEventSeqs"
        etype = event["type"]
        covers_system = first == 0 and self._events[self.nodes[0]]["type"] == "system/message"
        if covers_system and (etype != "system/message" or last != 0):
            return "only a system/message replacing exactly node 0 may cover the system node"
        if etype == "tool/result":
            old = self._events[shadowed[0]]
            if len(shadowed) != 1 or old["type"] != "tool/result":
                return "a tool/result replace must cover exactly one tool/result"
            if not _same_but_content(old["data"], event["data"]):
                return "a tool/result replace may change only message.content"
        return None

    def apply(self, event: Event) -> None:
        op = event["surfaceOp"]
        seq = event["seq"]
        if op == "append":
            self.nodes.append(seq)
            return
        first = self.nodes.index(op["startSeq"])
        last = self.nodes.index(op["endSeq"])
        self.nodes[first : last + 1] = [seq]
        self.replace_generation += 1
        self.content_generation += 1
        self._messages = []
        self._cached_nodes = 0
        self._system = []
        self._system_scanned = 0

    def system_nodes(self) -> list[int]:
        """The nodes that are ``system/message`` events, in surface order (fresh list), kept like the messages:
        the agent loop asks at every step, and the nodes an append adds are all it looks at."""
        nodes = self.nodes
        if self._system_scanned < len(nodes):
            events = self._events
            self._system += [seq for seq in nodes[self._system_scanned :] if events[seq]["type"] == "system/message"]
            self._system_scanned = len(nodes)
        return list(self._system)

    def messages(self) -> list[dict[str, Any]]:
        """The derived model history (fresh list, shared messages)."""
        nodes = self.nodes
        if self._cached_nodes < len(nodes):
            events = self._events
            for seq in nodes[self._cached_nodes :]:
                message = derive_event_message(events[seq])
                if message is not None:
                    self._messages.append(message)
            self._cached_nodes = len(nodes)
        return list(self._messages)


def _same_but_content(old: dict[str, Any], new: dict[str, Any]) -> bool:
    if set(old) != set(new) or set(old["message"]) != set(new["message"]):
        return False
    if any(old[k] != new[k] for k in old if k != "message"):
        return False
    return all(old["message"][k] == new["message"][k] for k in old["message"] if k != "content")
