"""The mailbox: relay text and source, waking, and message errors (spec 08 §A.11 #4–#6)."""

from __future__ import annotations

from pathlib import Path

from pydsh.session.keys import SESSION_QUERY
from tests.agent.harness import start_host
from tests.messaging.test_control_tools import add_wait_tool
from tests.subagents.helpers import calls, of_type, tool
from tests.teams.helpers import (
    TEAMS,
    codes,
    quiesce,
    spawn,
    team_records,
    teammates_answer_after_the_leads_first_turn,
    values,
)


async def test_04_teammate_messages_the_lead(tmp_path: Path) -> None:
    host = await start_host(
        [
            [calls(spawn()), {"text": "waiting"}] + [{"text": "ack"}] * 3,
            [calls(tool("send_message", target="lead", message="done")), {"text": "bye"}],
        ],
        patches=(TEAMS,),
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        child_id = team_records(lead.session)[0]["member"]["id"]
        relays = [m for m in lead.session.derive_messages() if (m.get("source") or {}).get("kind") == "agent-message"]
        assert relays[0]["content"] == [
            {"type": "text", "text": "Team message from grader:"},
            {"type": "text", "text": "done"},
        ]
        assert relays[0]["source"] == {"kind": "agent-message", "form": "relay", "senderSessionId": child_id}
        child = (await host.kernel.ctx.require(SESSION_QUERY).read_session(child_id))["events"]
        result = next(e["data"] for e in child if e["type"] == "tool/result")
        assert result["message"]["content"][0]["text"] == '{"sent":true}'
    finally:
        await host.close()


async def test_05_lead_messages_an_inactive_teammate_which_starts_a_turn(tmp_path: Path) -> None:
    host = await start_host(
        [
            [calls(spawn()), {"text": "waiting"}, calls(tool("send_message", target="grader", message="more"))]
            + [{"text": "ack"}] * 4,
            [{"text": "first"}, {"text": "second"}],
        ],
        patches=(TEAMS,),
    )
    lead = (await host.create(tmp_path)).agent

    teammates_answer_after_the_leads_first_turn(host, lead)
    try:
        await host.run(lead, "go")
        await quiesce(host)
        assert values(lead.session)[1] == {"sent": True}
        child_id = team_records(lead.session)[0]["member"]["id"]
        events = (await host.kernel.ctx.require(SESSION_QUERY).read_session(child_id))["events"]
        assert [e["data"]["turn"] for e in events if e["type"] == "turn/start"] == [1, 2]
        framed = [
            e["data"]["content"]
            for e in events
            if e["type"] == "user/message" and e["data"]["source"]["kind"] == "agent-message"
        ]
        assert framed[0][0]["text"] == "Team message from lead:"
        assert framed[0][1]["text"] == "more"
        assert len(of_type(lead.session, "subagent/catalog")) == 1
    finally:
        await host.close()


async def test_06_message_errors(tmp_path: Path) -> None:
    big = "x" * 70_000
    host = await start_host(
        [
            [
                calls(
                    tool("send_message", target="lead", message="me"),
                    tool("send_message", target="nobody", message="x"),
                    tool("send_message", target="lead", message=big),
                ),
                {"text": "done"},
            ]
        ],
        patches=(TEAMS,),
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        assert values(lead.session) == [
            "Error: a Team member cannot message itself",
            'Error: active teammate "nobody" not found',
            "Error: a Team member cannot message itself",
        ]
        assert codes(lead.session)[:2] == ["TEAM_SELF_MESSAGE", "TEAM_MEMBER_NOT_FOUND"]
    finally:
        await host.close()


async def test_06_oversized_message_to_a_teammate(tmp_path: Path) -> None:
    big = "x" * 70_000
    host = await start_host(
        [
            [calls(spawn()), calls(tool("send_message", target="grader", message=big)), {"text": "done"}]
            + [{"text": "ack"}] * 3,
            [{"text": "graded"}],
        ],
        patches=(TEAMS,),
    )
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        assert values(lead.session)[1] == "Error: team message exceeds 65536 bytes"
        assert codes(lead.session)[1] == "TEAM_MESSAGE_TOO_LARGE"
    finally:
        await host.close()


async def test_05_a_running_teammate_claims_the_message_at_its_next_step(tmp_path: Path) -> None:
    lead_script = [calls(spawn()), calls(tool("send_message", target="grader", message="steer")), {"text": "sent"}]
    host = await start_host(
        [lead_script + [{"text": "ack"}] * 3, [calls(tool("wait_until")), {"text": "steered"}]], patches=(TEAMS,)
    )

    def steered() -> bool:
        return any(a.inbox.next_step for a in host.agents.all() if a.session.header.get("parentSession"))

    add_wait_tool(host, steered)
    lead = (await host.create(tmp_path)).agent
    try:
        await host.run(lead, "go")
        await quiesce(host)
        child_id = team_records(lead.session)[0]["member"]["id"]
        events = (await host.kernel.ctx.require(SESSION_QUERY).read_session(child_id))["events"]
        assert [e["data"]["turn"] for e in events if e["type"] == "turn/start"] == [1]
        splices = [e for e in events if e["type"] == "agent/inbox/spliced" and e["data"]["target"] == "next-step"]
        assert splices[0]["data"]["inserted"][0]["content"][1]["text"] == "steer"
    finally:
        await host.close()
