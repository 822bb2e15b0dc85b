"""The Team fold: rebuild one Team's roster and task board from its Lead's log (spec 08 §A.7).

Records carry their ``teamId``; records of another Team (an ordinary fork inherits its parent's)
are ignored. The first violation is terminal: it is kept as ``failure`` and later records are
not applied, so every Team tool can answer ``TEAM_STATE_CORRUPT`` instead of a half-valid state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydsh.kernel.errors import PydshError
from pydsh.session.events import Event

VERSION = 2
MEMBER_KEYS = {"id", "name", "description", "provider", "context", "phase", "error"}
MEMBER_REQUIRED = MEMBER_KEYS - {"error"}
TASK_KEYS = {"id", "revision", "subject", "description", "status", "ownerId", "blockedBy", "writeScopes"}
TASK_REQUIRED = TASK_KEYS - {"ownerId"}
STATUSES = ("pending", "in_progress", "completed", "deleted")
PHASES = ("provisioning", "active", "failed")
TEAM_TYPES = ("team/member", "team/task", "team/message/queued", "team/message/delivered")


@dataclass
class Member:
    """One roster row as stored: the id is the teammate's Session id; names never change."""

    id: str
    name: str
    description: str
    provider: str
    context: str
    phase: str
    error: str | None = None

    def record(self) -> dict[str, Any]:
        """The ``member`` object of a ``team/member`` record, keys in the spec's order."""
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "provider": self.provider,
            "context": self.context,
            "phase": self.phase,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class TeamState:
    """A Team as folded: roster in creation order, tasks by id, legacy message bookkeeping."""

    team_id: str
    members: dict[str, Member] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    next_task: int = 1
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    failure: str | None = None

    def copy(self) -> TeamState:
        """A copy sharing the immutable rows (members and task snapshots are replaced, never edited)."""
        messages = {k: dict(v) for k, v in self.messages.items()}
        return TeamState(
            self.team_id, dict(self.members), dict(self.names), dict(self.tasks), self.next_task, messages, self.failure
        )

    def member_named(self, name: str) -> Member | None:
        member_id = self.names.get(name)
        return self.members.get(member_id) if member_id is not None else None


class FoldError(PydshError):
    """One violation found while folding; its text becomes the Team's ``failure``."""


def task_number(task_id: str) -> int:
    """``task-<n>`` → ``n`` (0 for an id of another shape)."""
    head, _, tail = task_id.partition("-")
    return int(tail) if head == "task" and tail.isdigit() else 0


def find_cycle(tasks: dict[str, dict[str, Any]], start: str, blockers: list[str]) -> bool:
    """Whether giving ``start`` the ``blockers`` closes a cycle in the blocked-by graph."""
    stack = list(blockers)
    seen: set[str] = set()
    while stack:
        current = stack.pop()
        if current == start:
            return True
        if current in seen:
            continue
        seen.add(current)
        task = tasks.get(current)
        if task is not None:
            stack.extend(task["blockedBy"])
    return False


def _invalid(event_type: str) -> FoldError:
    return FoldError(f"persisted Agent Teams {event_type} payload is invalid")


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


class TeamFold:
    """Applies one record to the state of the Team ``team_id`` (in place; the projection copies first)."""

    def __init__(self, team_id: str) -> None:
        self.team_id = team_id

    def fold(self, state: TeamState, event: Event) -> TeamState:
        etype = event["type"]
        if state.failure is not None or etype not in TEAM_TYPES:
            return state
        data = event["data"]
        if not isinstance(data, dict) or not isinstance(data.get("teamId"), str):
            state.failure = f"persisted Agent Teams {etype} payload is invalid"
            return state
        if data["teamId"] != self.team_id:
            return state
        try:
            if data.get("version") != VERSION:
                raise FoldError(f"unsupported Agent Teams event version {data.get('version')}")
            if etype == "team/member":
                _member(state, data)
            elif etype == "team/task":
                _task(state, data)
            else:
                _message(state, etype, data)
        except FoldError as exc:
            state.failure = str(exc)
        return state


def _member(state: TeamState, data: dict[str, Any]) -> None:
    raw = data.get("member")
    if set(data) != {"version", "teamId", "member"} or not isinstance(raw, dict):
        raise _invalid("team/member")
    if not MEMBER_REQUIRED <= set(raw) <= MEMBER_KEYS or not all(isinstance(v, str) for v in raw.values()):
        raise _invalid("team/member")
    if raw["context"] not in ("fresh", "fork") or raw["phase"] not in PHASES:
        raise _invalid("team/member")
    member = Member(**raw)
    known = state.members.get(member.id)
    owner = state.names.get(member.name)
    if owner is not None and owner != member.id:
        raise FoldError(f'teammate name "{member.name}" is reused by another member')
    if known is None:
        if member.phase != "provisioning":
            raise FoldError(f'teammate "{member.name}" must begin provisioning')
        state.members[member.id] = member
        state.names[member.name] = member.id
        return
    if (known.name, known.provider, known.context) != (member.name, member.provider, member.context):
        raise FoldError(f'teammate "{member.id}" changed immutable identity fields')
    if known.phase != "provisioning" or member.phase == "provisioning":
        raise FoldError(f'teammate "{member.name}" has an invalid {known.phase} -> {member.phase} transition')
    state.members[member.id] = member


def _task(state: TeamState, data: dict[str, Any]) -> None:
    task = data.get("task")
    if set(data) != {"version", "teamId", "task"} or not isinstance(task, dict):
        raise _invalid("team/task")
    if not TASK_REQUIRED <= set(task) <= TASK_KEYS:
        raise _invalid("team/task")
    texts = ("id", "subject", "description", "status")
    if not all(isinstance(task[k], str) for k in texts) or task["status"] not in STATUSES:
        raise _invalid("team/task")
    revision = task["revision"]
    if type(revision) is not int or not _strings(task["blockedBy"]) or not _strings(task["writeScopes"]):
        raise _invalid("team/task")
    if "ownerId" in task and not isinstance(task["ownerId"], str):
        raise _invalid("team/task")
    task_id = task["id"]
    previous = state.tasks.get(task_id)
    if previous is None and revision != 1:
        raise FoldError(f'team task "{task_id}" must begin at revision 1')
    if previous is not None and revision != previous["revision"] + 1:
        raise FoldError(f'team task "{task_id}" revision is not contiguous')
    blockers = task["blockedBy"]
    for blocker in blockers:
        if blocker == task_id or blocker not in state.tasks:
            raise FoldError(f'team task "{task_id}" has an invalid blocker "{blocker}"')
    if task["status"] != "deleted" and find_cycle(state.tasks, task_id, blockers):
        raise FoldError(f'team task "{task_id}" closes a dependency cycle')
    state.tasks[task_id] = dict(task)
    state.next_task = max(state.next_task, task_number(task_id) + 1)


def _message(state: TeamState, etype: str, data: dict[str, Any]) -> None:
    """Legacy mailbox records: validated, never written by pydsh."""
    if etype == "team/message/queued":
        message = data.get("message")
        if set(data) != {"version", "teamId", "message"} or not isinstance(message, dict):
            raise _invalid(etype)
        message_id = message.get("id")
        if not isinstance(message_id, str) or not isinstance(message.get("targetId"), str):
            raise _invalid(etype)
        if message_id in state.messages:
            raise FoldError(f'team message "{message_id}" was queued twice')
        state.messages[message_id] = {"targetId": message["targetId"], "delivered": False}
        return
    message_id = data.get("messageId")
    if set(data) != {"version", "teamId", "messageId", "targetId"} or not isinstance(message_id, str):
        raise _invalid(etype)
    queued = state.messages.get(message_id)
    if queued is None:
        raise FoldError(f'team message "{message_id}" was delivered before queueing')
    if queued["targetId"] != data["targetId"]:
        raise FoldError(f'team message "{message_id}" target changed')
    if queued["delivered"]:
        raise FoldError(f'team message "{message_id}" was delivered twice')
    queued["delivered"] = True
