"""Runtime-context snapshots and the system prompt as history (spec 03 §10.3, §11).

Both are append-only by design (P3): a new snapshot is appended only when its text changed, and
the system prompt is re-logged only when it changed — as an in-history update where the route
allows it, otherwise by replacing node 0 at the start of a new request series.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pydsh.contract.agent import UserMessage, user_message
from pydsh.session.events import Event
from pydsh.session.log import Session

HEADER = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots."
NONE_TEXT = "Current runtime context: none. Earlier runtime-context snapshots no longer apply."


def snapshot_text(sections: list[dict[str, str]]) -> str:
    if not sections:
        return ""
    return HEADER + "\n\n" + "\n\n".join(s["text"] for s in sections)


def is_runtime_context(message: dict[str, Any]) -> bool:
    return bool(message.get("source", {}).get("kind") == "runtime-context")


class SnapshotSeqs:
    """Fold unit ``runtimeContextSnapshots``: seqs of every runtime-context ``user/message``."""

    key = "runtimeContextSnapshots"

    def init(self) -> list[int]:
        return []

    def fold(self, state: list[int], event: Event) -> list[int]:
        if event["type"] == "user/message" and is_runtime_context(event["data"]):
            state.append(event["seq"])
        return state


SNAPSHOTS = SnapshotSeqs()


def retained_text(session: Session) -> tuple[bool, str | None]:
    """``(existed, text)``: text of the newest snapshot still on the surface (``None`` if none is)."""
    seqs = session.fold(SNAPSHOTS)
    if not seqs:
        return False, None
    on_surface = set(session.surface.nodes)
    for seq in reversed(seqs):
        if seq in on_surface:
            message = session.events[seq]["data"]
            if "form" not in message["source"]:
                return True, ""
            return True, "".join(b.get("text", "") for b in message["content"])
    return True, None


def project_snapshot(session: Session, sections: list[dict[str, str]]) -> UserMessage | None:
    """The snapshot message to log now, or ``None`` when the retained one still holds."""
    text = snapshot_text(sections)
    existed, retained = retained_text(session)
    if text:
        if text == retained:
            return None
        source = {"kind": "runtime-context", "form": "snapshot", "sections": [dict(s) for s in sections]}
        return user_message(text, source)
    if not existed or retained == "":
        return None
    return user_message(NONE_TEXT, {"kind": "runtime-context"})


@dataclass
class SystemUpdate:
    """One ``system/message`` to append: the message and its ``surfaceOp`` / sources."""

    message: dict[str, Any]
    surface_op: Any = "append"
    sources: list[int] | None = None


def system_message(text: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text else []
    return {"role": "system", "content": content, "source": {"kind": "system-prompt"}, "id": str(uuid.uuid4())}


def _system_text(event: Event) -> str:
    return "".join(b.get("text", "") for b in event["data"]["message"]["content"])


def project_system_prompt(
    session: Session, rendered: str, *, in_history: bool, starts_series: bool
) -> list[SystemUpdate]:
    """The ``system/message`` updates that make the logged prompt equal ``rendered`` (spec 03 §11)."""
    events = session.events
    system_nodes = session.surface.system_nodes()
    if not system_nodes:
        return [SystemUpdate(system_message(rendered))]
    if not in_history or starts_series or rendered == "":
        updates = []
        node0 = session.surface.nodes[0]
        for seq in system_nodes:
            if seq != node0 and _system_text(events[seq]):
                updates.append(SystemUpdate(system_message(""), _replace(seq), [seq]))
        if events[node0]["type"] == "system/message" and _system_text(events[node0]) != rendered:
            updates.append(SystemUpdate(system_message(rendered), _replace(node0), [node0]))
        return updates
    latest = next((_system_text(events[s]) for s in reversed(system_nodes) if _system_text(events[s])), "")
    if rendered != latest:
        return [SystemUpdate(system_message(rendered))]
    return []


def _replace(seq: int) -> dict[str, Any]:
    return {"op": "replace", "startSeq": seq, "endSeq": seq}
