"""Agent names: the segment grammar, the creator's catalog, and synchronous reservations (spec 07 §7).

A name is a model-facing reference and grants nothing. A child's segment is unique among its
creator's children (the creator's own catalog plus its live reservations), so full names —
segment paths from the root, which is ``lead`` — are unique in a tree without any registry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydsh.contract.tools import ToolError
from pydsh.session.errors import SessionLogError
from pydsh.session.events import Event

SEGMENT = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
ROOT = "lead"
CATALOG_MODES = {0: ("one-shot", "continuable"), 1: ("one-shot", "continuable", "unknown"), 2: ("external",)}


class SubagentError(ToolError):
    """A refused subagent operation; tools surface it as ``Error: <message>`` with ``code``."""

    error_name = "SubagentError"

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code)


def is_segment(text: str) -> bool:
    return bool(SEGMENT.match(text)) and text != ROOT


def invalid_name(name: str) -> SubagentError:
    return SubagentError(
        f'invalid agent name "{name}": use 1-32 lowercase letters, digits, or hyphens, '
        'starting with a letter, and not "lead"',
        "INVALID_AGENT_NAME",
    )


def duplicate_name(name: str) -> SubagentError:
    return SubagentError(
        f'agent name "{name}" is already taken among the subagents you started; choose another name or omit name',
        "DUPLICATE_AGENT_NAME",
    )


def unknown_name(name: str) -> SubagentError:
    return SubagentError(f'no agent named "{name}"; use list_agents({{}}) to find agent names', "UNKNOWN_AGENT_NAME")


@dataclass(frozen=True)
class CatalogEntry:
    """One child recorded in its creator's own log."""

    child_id: str
    created_at: int
    version: int
    mode: str
    label: str | None = None
    name: str | None = None


class CatalogState:
    """Fold unit ``subagentCatalog``: the creator's own-suffix entries, validated as they fold."""

    key = "subagentCatalog"

    def init(self) -> list[CatalogEntry]:
        return []

    def fold(self, state: list[CatalogEntry], event: Event) -> list[CatalogEntry]:
        etype = event["type"]
        if etype == "session/end-seed" and event["data"].get("inherited"):
            return []
        if etype != "subagent/catalog":
            return state
        entry = _entry(event)
        if any(e.child_id == entry.child_id for e in state):
            raise SessionLogError(event["seq"], f'duplicate catalog child "{entry.child_id}"')
        if entry.version == 3 and any(e.version == 3 and e.name == entry.name for e in state):
            raise SessionLogError(event["seq"], f'duplicate catalog name "{entry.name}"')
        state.append(entry)
        return state


def _entry(event: Event) -> CatalogEntry:
    data = event["data"]
    seq = event["seq"]
    version = data.get("version")
    mode = data.get("mode")
    if version == 3:
        if mode not in ("one-shot", "continuable") or not is_segment(str(data.get("name", ""))):
            raise SessionLogError(seq, "subagent/catalog v3 needs a one-shot/continuable mode and a valid name")
    elif version not in CATALOG_MODES or mode not in CATALOG_MODES[version]:
        raise SessionLogError(seq, f"subagent/catalog version {version!r} with mode {mode!r} is not valid")
    if mode == "continuable" and not isinstance(data.get("label"), str):
        raise SessionLogError(seq, "a continuable subagent/catalog entry needs a label")
    return CatalogEntry(
        child_id=str(data["childId"]),
        created_at=int(data["childCreatedAt"]),
        version=int(version),
        mode=str(mode),
        label=data.get("label"),
        name=data.get("name") if version == 3 else None,
    )


CATALOG = CatalogState()


def catalog_event(entry: CatalogEntry) -> dict[str, Any]:
    """``subagent/catalog`` v3 data, keys in the spec's order."""
    data: dict[str, Any] = {
        "childId": entry.child_id,
        "childCreatedAt": entry.created_at,
        "version": 3,
        "mode": entry.mode,
    }
    if entry.label is not None:
        data["label"] = entry.label
    data["name"] = entry.name
    return data


@dataclass
class Reservations:
    """Names reserved by creators whose children are still starting (in memory only)."""

    held: dict[str, set[str]] = field(default_factory=dict)

    def reserve(self, creator_id: str, taken: set[str], requested: str | None) -> Reservation:
        """Check or choose a segment and hold it, with no ``await`` in between (spec 07 §7.3)."""
        siblings = taken | self.held.get(creator_id, set())
        if requested is None:
            n = 1
            while f"agent-{n}" in siblings:
                n += 1
            name = f"agent-{n}"
        else:
            if not is_segment(requested):
                raise invalid_name(requested)
            if requested in siblings:
                raise duplicate_name(requested)
            name = requested
        self.held.setdefault(creator_id, set()).add(name)
        return Reservation(self, creator_id, name)

    def release(self, creator_id: str, name: str) -> None:
        names = self.held.get(creator_id)
        if names is not None:
            names.discard(name)
            if not names:
                del self.held[creator_id]


@dataclass
class Reservation:
    owner: Reservations
    creator_id: str
    name: str
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.owner.release(self.creator_id, self.name)
