"""The shared task board (spec 08 §A.11 #7–#10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydsh.session.keys import SESSION_PROJECTIONS, SESSION_QUERY
from tests.agent.harness import start_host
from tests.subagents.helpers import calls, tool
from tests.teams.helpers import TEAMS, codes, quiesce, spawn, team_records, values


def create(subject: str, **extra: Any) -> dict[str, Any]:
    return tool("team_task_create", subject=subject, description=f"do {subject}", **extra)


def update(task_id: str, expected: int, action: str, **extra: Any) -> dict[str, Any]:
    return tool("team_task_update", task_id=task_id, expected_revision=expected, action=action, **extra)


async def test_07_claim_and_complete_with_compare_and_set(tmp_path: Path) -> None:
    grader = [
        calls(update("task-1", 1, "claim")),
        calls(update("task-1", 1, "complete")),
        calls(update("task-1", 2, "complete")),
        {"text": "done"},
    ]
    host = await start_host(
        [[calls(create("grade")), calls(spawn()), {"text": "waiting"}] + [{"text": "ack"}] * 3, grader],
        patches=(TEAMS,),
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        created = values(lead.session)[0]
        assert (created["id"], created["revision"], created["status"], created["ready"]) == (
            "task-1",
            1,
            "pending",
            True,
        )
        assert "ownerName" not in created
        grader_id = team_records(lead.session)[0]["member"]["id"]
        events = (await host.kernel.ctx.require(SESSION_QUERY).read_session(grader_id))["events"]
        texts = [e["data"]["message"]["content"][0]["text"] for e in events if e["type"] == "tool/result"]
        assert '"revision":2' in texts[0] and '"ownerName":"grader"' in texts[0]
        assert texts[1] == 'Error: stale team task "task-1" revision 1; current revision is 2'
        assert '"status":"completed"' in texts[2] and '"revision":3' in texts[2]
        stored = [r["task"] for r in team_records(lead.session, "team/task")]
        assert [t["revision"] for t in stored] == [1, 2, 3]
        assert stored[1]["ownerId"] == grader_id
    finally:
        await host.close()


async def test_08_dependencies_block_claims_deletes_and_cycles(tmp_path: Path) -> None:
    script = [
        calls(
            create("a"),
            create("b", blocked_by=["task-1"]),
            update("task-2", 1, "claim"),
            update("task-1", 1, "delete"),
            update("task-2", 1, "set_dependencies", blocked_by=["task-2"]),
            create("c", blocked_by=["task-1", "task-1"]),
            create("d", blocked_by=["task-9"]),
        ),
        {"text": "done"},
    ]
    host = await start_host([script], patches=(TEAMS,))
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        got = values(lead.session)
        assert got[1]["ready"] is False and got[1]["blockedBy"] == ["task-1"]
        assert got[2] == 'Error: team task "task-2" is not ready to claim'
        assert got[3] == 'Error: team task "task-1" still blocks "task-2"'
        assert got[4] == "Error: a team task cannot block itself"
        assert got[5] == 'Error: duplicate blocker "task-1"'
        assert got[6] == 'Error: blocker task "task-9" not found'
        assert codes(lead.session)[2:7] == [
            "TEAM_TASK_BLOCKED",
            "TEAM_TASK_HAS_DEPENDENTS",
            "TEAM_TASK_DEPENDENCY_CYCLE",
            "TEAM_INVALID_ARGUMENT",
            "TEAM_TASK_NOT_FOUND",
        ]
    finally:
        await host.close()


async def test_08_a_longer_cycle_is_refused(tmp_path: Path) -> None:
    script = [
        calls(
            create("a"),
            create("b", blocked_by=["task-1"]),
            update("task-1", 1, "set_dependencies", blocked_by=["task-2"]),
        ),
        {"text": "done"},
    ]
    host = await start_host([script], patches=(TEAMS,))
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        assert codes(lead.session)[2] == "TEAM_TASK_DEPENDENCY_CYCLE"
    finally:
        await host.close()


async def test_09_overlapping_write_scopes_warn_and_bad_scopes_fail(tmp_path: Path) -> None:
    script = [
        calls(
            create("a", write_scopes=["./src/"]),
            create("b", write_scopes=["src\\app.py"]),
            update("task-1", 1, "claim"),
            update("task-2", 1, "claim"),
            tool("team_task_get", task_id="task-1"),
            tool("team_task_get", task_id="task-2"),
            create("c", write_scopes=["../x"]),
            create("d", write_scopes=["/abs"]),
            create("e", write_scopes=["C:/x"]),
        ),
        {"text": "done"},
    ]
    host = await start_host([script], patches=(TEAMS,))
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        got = values(lead.session)
        assert got[0]["writeScopes"] == ["src"] and got[1]["writeScopes"] == ["src/app.py"]
        assert got[4]["writeScopeWarnings"] == ["write scopes overlap with task-2"]
        assert got[5]["writeScopeWarnings"] == ["write scopes overlap with task-1"]
        assert got[4]["ownerName"] == "lead"
        assert got[6] == 'Error: invalid workspace-relative write scope "../x"'
        assert codes(lead.session)[6:9] == ["TEAM_INVALID_WRITE_SCOPE"] * 3
        view = host.kernel.ctx.require(SESSION_PROJECTIONS).snapshot(lead.session, ["agentTeam"])["values"]
        team = view["agentTeam"]
        assert team["members"] == [{"id": lead.id, "name": "lead", "role": "lead", "phase": "active"}]
        assert [t["ownerName"] for t in team["tasks"]] == ["lead", "lead"]
        assert "failure" not in team
    finally:
        await host.close()


async def test_10_listing_filters_and_pages(tmp_path: Path) -> None:
    script = [
        calls(
            create("a"),
            create("b"),
            create("c"),
            tool("team_task_list", owner="unowned", limit=1),
            tool("team_task_list", limit=0),
            tool("team_task_list", cursor=-1),
            tool("team_task_list", owner="unowned", cursor=2),
        ),
        {"text": "done"},
    ]
    host = await start_host([script], patches=(TEAMS,))
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        got = values(lead.session)
        assert [t["id"] for t in got[3]["tasks"]] == ["task-1"] and got[3]["nextCursor"] == 1
        assert got[4] == "Error: limit must be an integer from 1 through 100"
        assert got[5] == "Error: cursor must be a non-negative safe integer"
        assert [t["id"] for t in got[6]["tasks"]] == ["task-3"] and "nextCursor" not in got[6]
    finally:
        await host.close()
