"""Agent Teams benchmark: a Team of 16 teammates and 1,000 tasks in the Lead's log.

Run: python bench/teams.py
1. Cold rebuild: the ``agentTeam`` projection folded from a stored Lead log (header + events, as a
   resume reads them) — target under 200 ms.
2. ``team_task_list`` latency: the default page (50 rows), a filtered page, and the last page.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydsh.session.events import build_event, make_header  # noqa: E402
from pydsh.session.log import Session  # noqa: E402
from pydsh.teams import board  # noqa: E402
from pydsh.teams.projection import TeamUnit  # noqa: E402

MEMBERS, TASKS = 16, 1000


def lead_log() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lead = str(uuid.uuid4())
    header = make_header(lead, 1, cwd="/w")
    records: list[tuple[str, dict[str, Any]]] = []
    ids = [str(uuid.uuid4()) for _ in range(MEMBERS)]
    for n, member_id in enumerate(ids):
        member = {"id": member_id, "name": f"m{n}", "description": "d", "provider": "spawn", "context": "fresh"}
        for phase in ("provisioning", "active"):
            records.append(("team/member", {"version": 2, "teamId": lead, "member": {**member, "phase": phase}}))
    for n in range(1, TASKS + 1):
        task: dict[str, Any] = {
            "id": f"task-{n}",
            "revision": 1,
            "subject": f"s{n}",
            "description": "d",
            "status": "pending",
            "blockedBy": [f"task-{n - 1}"] if n > 1 and n % 10 else [],
            "writeScopes": [f"src/m{n % MEMBERS}"],
        }
        records.append(("team/task", {"version": 2, "teamId": lead, "task": task}))
        if n % 3 == 0:
            claimed = {**task, "revision": 2, "status": "in_progress", "ownerId": ids[n % MEMBERS]}
            records.append(("team/task", {"version": 2, "teamId": lead, "task": claimed}))
    events = [build_event(t, seq, 1 + seq, d) for seq, (t, d) in enumerate(records)]
    return header, events


def rebuild(header: dict[str, Any], events: list[dict[str, Any]]) -> Any:
    unit = TeamUnit()
    state = unit.init(header, 0)
    for event in Session(header, events).events:
        state = unit.apply(state, event)
    return state


def timed(fn: Any, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    header, events = lead_log()
    cold = timed(lambda: rebuild(header, events), 10)
    state = rebuild(header, events)
    assert state.failure is None and len(state.tasks) == TASKS and len(state.members) == MEMBERS

    def name_of(session_id: str) -> str:
        member = state.members.get(session_id)
        return member.name if member is not None else "lead"

    first = timed(lambda: board.listing(state, {}, name_of), 50)
    owned = timed(lambda: board.listing(state, {"owner": "m3", "limit": 100}, name_of), 50)
    last = timed(lambda: board.listing(state, {"cursor": 950}, name_of), 50)
    print(f"Team: {MEMBERS} teammates, {TASKS} tasks, {len(events)} records in the Lead's log")
    print(f"cold rebuild (session + agentTeam fold): median {statistics.median(cold):.1f} ms, max {max(cold):.1f} ms")
    print(f"team_task_list default page: median {statistics.median(first):.2f} ms")
    print(f"team_task_list owner filter: median {statistics.median(owned):.2f} ms")
    print(f"team_task_list last page:    median {statistics.median(last):.2f} ms")


if __name__ == "__main__":
    main()
