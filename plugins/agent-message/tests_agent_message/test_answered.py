"""Our addition to spec 09: ``reply_to`` on ``send_agent_message`` and the ``answered`` receipt state."""

from __future__ import annotations

from pathlib import Path

import pytest

from pydsh.contract.tools import ToolError

from .world import new_id, text, until, world


def turns(agent) -> int:
    return sum(e["type"] == "turn/end" for e in agent.events)


async def test_a_reply_marks_the_original_answered_in_single_and_bulk_receipts() -> None:
    async with world([[text("b got it")], [text("a got the reply")]]) as w:
        agent_a, agent_b = await w.root(), await w.root()
        sent = await w.send(agent_a, agent_b.session_id, "what is 2+2?")
        await until(lambda: turns(agent_b) == 1)
        reply = await w.send(agent_b, agent_a.session_id, "4", reply_to=sent["messageId"])
        await until(lambda: turns(agent_a) == 1)
        single = (await w.check(agent_a, agent_b.session_id, sent["messageId"]))["entries"][0]
        assert single["state"] == "answered" and single["replyMessageId"] == reply["messageId"]
        bulk = (await w.check(agent_a, agent_b.session_id))["entries"]
        assert [(e["messageId"], e["state"], e["replyMessageId"]) for e in bulk] == [
            (sent["messageId"], "answered", reply["messageId"])
        ]
        relay = next(e for e in agent_a.events if e["type"] == "user/message" and e["data"]["id"] == reply["messageId"])
        assert relay["data"]["source"]["replyTo"] == sent["messageId"]
        assert relay["data"]["content"][0]["text"].startswith(
            f'<dsh-agent-message>{{"senderSessionId":"{agent_b.session_id}"}}</dsh-agent-message>\n\n'
        )


async def test_a_reply_to_an_unknown_or_foreign_message_is_rejected_and_writes_nothing() -> None:
    async with world([[text("b")]]) as w:
        agent_a, agent_b, agent_c = await w.root(), await w.root(), await w.root()
        from_c = await w.send(agent_c, agent_b.session_id, "hello from C")
        await until(lambda: turns(agent_b) == 1)
        for reply_to in (new_id(), from_c["messageId"]):
            with pytest.raises(ToolError) as caught:
                await w.send(agent_b, agent_a.session_id, "answer", reply_to=reply_to)
            assert caught.value.code == "AGENT_MESSAGE_REPLY_UNKNOWN"
            assert caught.value.message == (
                f"reply_to {reply_to} is not a message this session received from {agent_a.session_id}"
            )
        assert not [e for e in agent_a.events if e["type"] == "agent/inbox/spliced"]


async def test_answered_survives_a_restart(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    async with world([[text("b")], [text("a")]], dsh_home=home) as w:
        agent_a, agent_b = await w.root(), await w.root()
        a, b = agent_a.session_id, agent_b.session_id
        sent = await w.send(agent_a, b, "question?")
        await until(lambda: turns(agent_b) == 1)
        reply = await w.send(agent_b, a, "answer", reply_to=sent["messageId"])
        await until(lambda: turns(agent_a) == 1)
    async with world([], dsh_home=home) as w:
        agent_a = await w.host.resume_agent(a)
        entries = (await w.check(agent_a, b, sent["messageId"]))["entries"]
        assert entries == [
            {
                "messageId": sent["messageId"],
                "state": "answered",
                "replyMessageId": reply["messageId"],
                "targetRuntimeStatus": "offline",
            }
        ]
        assert w.live(b) is None
