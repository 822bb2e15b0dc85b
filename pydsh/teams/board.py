"""The shared task board: validation, compare-and-set transitions and model-facing views (spec 08 §A.6).

Pure functions over a folded :class:`TeamState`: each update returns the next stored snapshot,
which the service appends as one ``team/task`` record. Storage keeps owner Session ids; views
show owner names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydsh.teams.errors import TeamError
from pydsh.teams.fold import TeamState, find_cycle, task_number

SUBJECT_LIMIT = 200
DESCRIPTION_LIMIT = 16384
ACTIONS = ("claim", "release", "edit", "set_dependencies", "complete", "reopen", "reassign", "delete")
_DRIVE = re.compile(r"^[A-Za-z]:")


def text_field(value: object, field: str, limit: int) -> str:
    """A trimmed, non-empty string of at most ``limit`` characters."""
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise TeamError(f"{field} must be non-empty", "TEAM_INVALID_ARGUMENT")
    if len(text) > limit:
        raise TeamError(f"{field} exceeds {limit} characters", "TEAM_INVALID_ARGUMENT")
    return text


def write_scope(value: object) -> str:
    """A normalised workspace-relative scope (backslashes → ``/``, no leading ``./`` or trailing ``/``)."""
    raw = value if isinstance(value, str) else str(value)
    text = raw.replace("\\", "/")
    if text.startswith("./"):
        text = text[2:]
    text = text.rstrip("/")
    segments = text.split("/")
    if not text or raw.startswith(("/", "\\")) or _DRIVE.match(text) or any(s in ("", ".", "..") for s in segments):
        raise TeamError(f'invalid workspace-relative write scope "{raw}"', "TEAM_INVALID_WRITE_SCOPE")
    return text


def write_scopes(values: object) -> list[str]:
    if values is None:
        return []
    if not isinstance(values, list):
        raise TeamError("write_scopes must be a list of strings", "TEAM_INVALID_ARGUMENT")
    return [write_scope(v) for v in values]


def overlaps(a: str, b: str) -> bool:
    """Equal scopes, or one a path-segment prefix of the other."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def blockers(state: TeamState, task_id: str | None, values: object) -> list[str]:
    """Existing, non-deleted, distinct blockers that keep the graph acyclic."""
    if values is None:
        return []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TeamError("blocked_by must be a list of task ids", "TEAM_INVALID_ARGUMENT")
    seen: set[str] = set()
    for blocker in values:
        if blocker in seen:
            raise TeamError(f'duplicate blocker "{blocker}"', "TEAM_INVALID_ARGUMENT")
        seen.add(blocker)
        if task_id is not None and blocker == task_id:
            raise TeamError("a team task cannot block itself", "TEAM_TASK_DEPENDENCY_CYCLE")
        found = state.tasks.get(blocker)
        if found is None or found["status"] == "deleted":
            raise TeamError(f'blocker task "{blocker}" not found', "TEAM_TASK_NOT_FOUND")
    if task_id is not None and find_cycle(state.tasks, task_id, list(values)):
        raise TeamError(f'team task "{task_id}" dependencies would form a cycle', "TEAM_TASK_DEPENDENCY_CYCLE")
    return list(values)


def is_ready(state: TeamState, task: dict[str, Any]) -> bool:
    return task["status"] == "pending" and all(
        state.tasks.get(b, {}).get("status") == "completed" for b in task["blockedBy"]
    )


def view(state: TeamState, task: dict[str, Any], name_of: Callable[[str], str]) -> dict[str, Any]:
    """The model-facing ``TaskView`` (owner by name, readiness, overlap warnings)."""
    out: dict[str, Any] = {
        "id": task["id"],
        "revision": task["revision"],
        "subject": task["subject"],
        "description": task["description"],
        "status": task["status"],
    }
    if "ownerId" in task:
        out["ownerName"] = name_of(task["ownerId"])
    out["blockedBy"] = list(task["blockedBy"])
    out["writeScopes"] = list(task["writeScopes"])
    out["ready"] = is_ready(state, task)
    out["writeScopeWarnings"] = warnings(state, task)
    return out


def warnings(state: TeamState, task: dict[str, Any]) -> list[str]:
    if task["status"] != "in_progress" or not task["writeScopes"]:
        return []
    out = []
    for other in state.tasks.values():
        if other["id"] == task["id"] or other["status"] != "in_progress":
            continue
        if any(overlaps(a, b) for a in task["writeScopes"] for b in other["writeScopes"]):
            out.append(f"write scopes overlap with {other['id']}")
    return out


def new_task(state: TeamState, args: dict[str, Any], max_tasks: int) -> dict[str, Any]:
    """The revision-1 snapshot of a new unowned pending task."""
    subject = text_field(args.get("subject"), "subject", SUBJECT_LIMIT)
    description = text_field(args.get("description"), "description", DESCRIPTION_LIMIT)
    blocked = blockers(state, None, args.get("blocked_by"))
    scopes = write_scopes(args.get("write_scopes"))
    live = sum(1 for t in state.tasks.values() if t["status"] != "deleted")
    if live >= max_tasks:
        raise TeamError(f"Team task limit {max_tasks} reached", "TEAM_TASK_LIMIT")
    return {
        "id": f"task-{state.next_task}",
        "revision": 1,
        "subject": subject,
        "description": description,
        "status": "pending",
        "blockedBy": blocked,
        "writeScopes": scopes,
    }


def find(state: TeamState, task_id: object) -> dict[str, Any]:
    task = state.tasks.get(task_id) if isinstance(task_id, str) else None
    if task is None:
        raise TeamError(f'team task "{task_id}" not found', "TEAM_TASK_NOT_FOUND")
    return task


def transition(
    state: TeamState,
    args: dict[str, Any],
    caller_id: str,
    is_lead: bool,
    owner_of: Callable[[str], str],
) -> dict[str, Any]:
    """The next snapshot of a compare-and-set update; ``owner_of(target)`` resolves a reassign owner."""
    task = find(state, args.get("task_id"))
    task_id = task["id"]
    expected = args.get("expected_revision")
    if type(expected) is not int or expected != task["revision"]:
        raise TeamError(
            f'stale team task "{task_id}" revision {expected}; current revision is {task["revision"]}',
            "TEAM_TASK_STALE_REVISION",
        )
    if task["status"] == "deleted":
        raise TeamError(f'team task "{task_id}" is deleted', "TEAM_TASK_DELETED")
    action = args.get("action")
    if action not in ACTIONS:
        raise TeamError(f"unsupported task action {action}", "TEAM_INVALID_ARGUMENT")
    nxt = dict(task)
    nxt["revision"] = task["revision"] + 1
    owner = task.get("ownerId")
    if action == "claim":
        if owner is not None and owner != caller_id:
            raise TeamError(f'team task "{task_id}" is owned by another member', "TEAM_TASK_ALREADY_CLAIMED")
        if not is_ready(state, task):
            raise TeamError(f'team task "{task_id}" is not ready to claim', "TEAM_TASK_BLOCKED")
        nxt["status"], nxt["ownerId"] = "in_progress", caller_id
        return _ordered(nxt)
    if action == "reassign":
        return _reassign(state, task=task, nxt=nxt, args=args, is_lead=is_lead, owner_of=owner_of)
    if not is_lead and owner != caller_id:
        raise TeamError("task mutation requires its owner or Team Lead", "TEAM_TASK_UNAUTHORIZED")
    if action == "release":
        _require(task, "in_progress", "only an in-progress task can be released")
        nxt["status"] = "pending"
        nxt.pop("ownerId", None)
    elif action == "edit":
        _edit(nxt, args)
    elif action == "set_dependencies":
        if args.get("blocked_by") is None:
            raise TeamError("set_dependencies requires blocked_by", "TEAM_INVALID_ARGUMENT")
        nxt["blockedBy"] = blockers(state, task_id, args["blocked_by"])
    elif action == "complete":
        _require(task, "in_progress", "only an in-progress task can complete")
        nxt["status"] = "completed"
    elif action == "reopen":
        _require(task, "completed", "only a completed task can reopen")
        nxt["status"] = "pending"
        nxt.pop("ownerId", None)
    else:
        dependent = next(
            (t["id"] for t in state.tasks.values() if t["status"] != "deleted" and task_id in t["blockedBy"]), None
        )
        if dependent is not None:
            raise TeamError(f'team task "{task_id}" still blocks "{dependent}"', "TEAM_TASK_HAS_DEPENDENTS")
        nxt["status"] = "deleted"
    return _ordered(nxt)


def _require(task: dict[str, Any], status: str, message: str) -> None:
    if task["status"] != status:
        raise TeamError(message, "TEAM_TASK_INVALID_TRANSITION")


def _edit(nxt: dict[str, Any], args: dict[str, Any]) -> None:
    given = [k for k in ("subject", "description", "write_scopes") if args.get(k) is not None]
    if not given:
        raise TeamError("task edit requires subject, description, or write_scopes", "TEAM_INVALID_ARGUMENT")
    if args.get("subject") is not None:
        nxt["subject"] = text_field(args["subject"], "subject", SUBJECT_LIMIT)
    if args.get("description") is not None:
        nxt["description"] = text_field(args["description"], "description", DESCRIPTION_LIMIT)
    if args.get("write_scopes") is not None:
        nxt["writeScopes"] = write_scopes(args["write_scopes"])


def _reassign(
    state: TeamState,
    *,
    task: dict[str, Any],
    nxt: dict[str, Any],
    args: dict[str, Any],
    is_lead: bool,
    owner_of: Callable[[str], str],
) -> dict[str, Any]:
    if not is_lead:
        raise TeamError("only the Team Lead can reassign tasks", "TEAM_LEAD_REQUIRED")
    if task["status"] not in ("pending", "in_progress"):
        raise TeamError("only a pending or in-progress task can be reassigned", "TEAM_TASK_INVALID_TRANSITION")
    target = args.get("owner")
    target = target.strip() if isinstance(target, str) else ""
    if not target:
        nxt["status"] = "pending"
        nxt.pop("ownerId", None)
        return _ordered(nxt)
    if not all(state.tasks.get(b, {}).get("status") == "completed" for b in task["blockedBy"]):
        raise TeamError(f'team task "{task["id"]}" is blocked', "TEAM_TASK_BLOCKED")
    nxt["status"], nxt["ownerId"] = "in_progress", owner_of(target)
    return _ordered(nxt)


def _ordered(task: dict[str, Any]) -> dict[str, Any]:
    """The stored snapshot with keys in the spec's order."""
    keys = ("id", "revision", "subject", "description", "status", "ownerId", "blockedBy", "writeScopes")
    return {k: task[k] for k in keys if k in task}


def listing(state: TeamState, args: dict[str, Any], name_of: Callable[[str], str]) -> dict[str, Any]:
    """``{tasks, nextCursor?}``: non-deleted tasks in numeric order, filtered, then paged."""
    cursor = args.get("cursor", 0)
    limit = args.get("limit", 50)
    if type(cursor) is not int or cursor < 0 or cursor > 2**53 - 1:
        raise TeamError("cursor must be a non-negative safe integer")
    if type(limit) is not int or not 1 <= limit <= 100:
        raise TeamError("limit must be an integer from 1 through 100")
    status = args.get("status")
    owner = args.get("owner")
    owner = owner.strip() if isinstance(owner, str) else None
    ready = args.get("ready")
    rows = []
    for task in sorted(state.tasks.values(), key=lambda t: task_number(t["id"])):
        if task["status"] == "deleted" or (status is not None and task["status"] != status):
            continue
        shown = name_of(task["ownerId"]) if "ownerId" in task else "unowned"
        if owner is not None and shown != owner:
            continue
        if ready is not None and is_ready(state, task) != ready:
            continue
        rows.append(task)
    page = [view(state, task, name_of) for task in rows[cursor : cursor + limit]]
    out: dict[str, Any] = {"tasks": page}
    if cursor + limit < len(rows):
        out["nextCursor"] = cursor + limit
    return out
