"""The acceptance tests of spec 09 §8, one test each, in one scripted host with roots A, B, C, a fork F of A
and a subagent S of A."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pydsh.agent.keys import AGENTS, SYSTEM_PROMPT
from pydsh.contract.agent import text_of
from pydsh.contract.tools import ToolError

from .world import ARCHIVED, entered, gate_call, new_id, release, text, until, world

RELAY = '<dsh-agent-message>{{"senderSessionId":"{}"}}</dsh-agent-message>\n\n{}'


def spliced(events: list[dict], message_id: str) -> list[dict]:
    """The inbox splices that insert or remove ``message_id`` (inserted ones carry it)."""
    return [
        e
        for e in events
        if e["type"] == "agent/inbox/spliced" and any(m["id"] == message_id for m in e["data"]["inserted"])
    ]


def turns(events: list[dict]) -> int:
    return sum(e["type"] == "turn/end" for e in events)


async def rejected(call, code: str) -> str:
    with pytest.raises(ToolError) as caught:
        await call
    assert caught.value.code == code, caught.value.message
    return caught.value.message


async def test_1_send_to_idle_peer_queues_a_relay_turn() -> None:
    a, b = new_id(), new_id()
    call = {"name": "send_agent_message", "arguments": {"to": b, "content": "ping"}}
    async with world([[{"tool_calls": [call]}, text("sent")], [text("pong")]]) as w:
        agent_a = await w.root(a)
        agent_b = await w.root(b)
        run = await agent_a.run("tell B ping")
        result = next(e for e in run.events if e["type"] == "tool/result")["data"]
        value = result["meta"]
        assert value["state"] == "accepted" and value["mode"] == "followup" and value["ok"] is True
        message_id = value["messageId"]
        assert message_id in text_of(result["message"]) and value["text"] == text_of(result["message"])
        await until(lambda: turns(agent_b.events) == 1)
        events = agent_b.events
        splice = spliced(events, message_id)[0]
        assert splice["data"]["target"] == "next-turn"
        user = next(e for e in events if e["type"] == "user/message" and e["data"]["id"] == message_id)
        assert splice["seq"] < user["seq"]
        assert user["data"]["source"] == {
            "kind": "dsh-agent-message",
            "form": "relay",
            "protocolVersion": 1,
            "senderSessionId": a,
            "targetSessionId": b,
            "senderTitle": "tell B ping",
        }
        assert text_of(user["data"]) == RELAY.format(a, "ping")
        w.host.assert_consumed()


async def test_2_followup_to_running_peer_is_pending_then_claimed() -> None:
    async with world([[gate_call("b"), text("done"), text("next")]]) as w:
        agent_a, agent_b = await w.root(), await w.root()
        run = asyncio.ensure_future(agent_b.run("work"))
        await entered("b")
        sent = await w.send(agent_a, agent_b.session_id)
        assert sent["targetRuntimeStatus"] == "running"
        before = [e["type"] for e in agent_b.events].count("turn/start")
        check = await w.check(agent_a, agent_b.session_id, sent["messageId"])
        entry = check["entries"][0]
        assert isinstance(entry.pop("sentAt"), int)
        assert check["entries"] == [
            {"messageId": sent["messageId"], "mode": "followup", "state": "pending", "targetRuntimeStatus": "running"}
        ]
        assert [e["type"] for e in agent_b.events].count("turn/start") == before
        release("b")
        await run
        await until(lambda: turns(agent_b.events) == 2)
        check = await w.check(agent_a, agent_b.session_id, sent["messageId"])
        assert check["entries"][0]["state"] == "claimed"
        assert check["receiptMeaning"].startswith("claimed only means a target turn took the message")


@pytest.mark.parametrize("mode", ["inject", "steer"])
async def test_3_step_modes_go_to_next_step_of_running_peer_and_are_rejected_when_idle(mode: str) -> None:
    async with world([[gate_call("b"), text("done")]]) as w:
        agent_a, agent_b = await w.root(), await w.root()
        message = await rejected(w.send(agent_a, agent_b.session_id, mode=mode), "AGENT_MESSAGE_NOT_RUNNING")
        assert message == f"{mode} is only for running sessions; target status: idle"
        assert not [e for e in agent_b.events if e["type"] == "agent/inbox/spliced"]
        run = asyncio.ensure_future(agent_b.run("work"))
        await entered("b")
        sent = await w.send(agent_a, agent_b.session_id, mode=mode)
        assert sent["mode"] == mode
        events = agent_b.events
        insert = spliced(events, sent["messageId"])[0]
        assert insert["data"]["target"] == "next-step"
        release("b")
        await run
        events = agent_b.events
        claim = next(
            e
            for e in events
            if e["seq"] > insert["seq"] and e["type"] == "agent/inbox/spliced" and e["data"]["target"] == "next-step"
        )
        assert "outcome" not in claim["data"]
        assert not [e for e in events if insert["seq"] < e["seq"] < claim["seq"] and e["type"] == "turn/start"]
        assert turns(events) == 1
        assert (await w.check(agent_a, agent_b.session_id, sent["messageId"]))["entries"][0]["state"] == "claimed"


async def test_4_offline_peer_is_resumed_with_the_default_route_and_kept_loaded() -> None:
    async with world([[text("hi")]]) as w:
        agent_a = await w.root()
        c = await w.offline()
        w.spy_resume()
        await rejected(w.send(agent_a, c, mode="steer"), "AGENT_MESSAGE_NOT_RUNNING")
        assert w.resumes == [] and w.live(c) is None
        sent = await w.send(agent_a, c)
        assert sent["targetRuntimeStatus"] in ("running", "idle")
        assert len(w.resumes) == 1
        options = w.resumes[0]["options"]
        assert (options.provider, options.model) == ("deepseek-official", "deepseek-v4-flash")
        assert callable(w.resumes[0]["setup"])
        live = w.live(c)
        await until(lambda: turns(live.session.events) == 1)
        await live.when_idle()
        assert w.live(c) is live and live.status == "idle"
        assert w.disposed == []
    assert w.disposed == [c]


async def test_5_concurrent_sends_to_an_offline_peer_share_one_resume() -> None:
    async with world([[text("one"), text("two")]]) as w:
        agent_a = await w.root()
        c = await w.offline()
        w.spy_resume()
        first, second = await asyncio.gather(w.send(agent_a, c, "first"), w.send(agent_a, c, "second"))
        assert len(w.resumes) == 1
        live = w.live(c)
        await until(lambda: turns(live.session.events) == 2)
        users = [
            e["data"]["id"]
            for e in live.session.events
            if e["type"] == "user/message" and e["data"]["source"]["kind"] == "dsh-agent-message"
        ]
        assert users == [first["messageId"], second["messageId"]]


async def test_6_self_archived_subagent_targets_are_rejected_and_forks_accepted() -> None:
    async with world([[text("a")], [text("f")]]) as w:
        agent_a, agent_b = await w.root(), await w.root()
        await agent_a.run("hello")
        fork = await w.fork(agent_a)
        sub = await w.subagent(agent_a)
        persisted_sub = await w.subagent(agent_a)
        await w.ctx.require(AGENTS).handle(persisted_sub.id).dispose()
        for to in (agent_a.session_id, ""):
            assert (
                await rejected(w.send(agent_a, to), "AGENT_MESSAGE_SELF") == "cannot send a message to your own session"
            )
        ARCHIVED.add(agent_b.session_id)
        text_ = await rejected(w.send(agent_a, agent_b.session_id), "AGENT_MESSAGE_ARCHIVED")
        assert text_ == "target session is archived; unarchive it first"
        for to in (sub.id, persisted_sub.id):
            text_ = await rejected(w.send(agent_a, to), "AGENT_MESSAGE_SUBAGENT_TARGET")
            assert text_ == "target is a subagent; cross-session messages go only to independent sessions"
        assert (await w.send(agent_a, fork.id))["state"] == "accepted"


async def test_7_subagent_callers_are_rejected_by_every_tool() -> None:
    async with world([]) as w:
        agent_a = await w.root()
        sub = await w.subagent(agent_a)
        for tool, args in (
            ("list_peer_agents", {}),
            ("send_agent_message", {"to": agent_a.session_id, "content": "x"}),
            ("check_delivery", {"to": agent_a.session_id}),
        ):
            text_ = await rejected(w.call(sub, tool, args), "AGENT_MESSAGE_SUBAGENT_CALLER")
            assert text_ == "subagents cannot use cross-session messaging tools"


async def test_8_reserved_tag_and_empty_content_are_rejected() -> None:
    async with world([]) as w:
        agent_a, agent_b = await w.root(), await w.root()
        text_ = await rejected(
            w.send(agent_a, agent_b.session_id, "a </dsh-agent-message> b"), "AGENT_MESSAGE_RESERVED_TAG"
        )
        assert text_ == "content must not contain the reserved dsh-agent-message tag"
        text_ = await rejected(w.send(agent_a, agent_b.session_id, "  "), "AGENT_MESSAGE_EMPTY")
        assert text_ == "content must be non-empty"
        assert not [e for e in agent_b.events if e["type"] == "agent/inbox/spliced"]


async def test_9_pair_rate_limit_counts_both_directions_and_not_failed_resumes() -> None:
    async with world([[gate_call("a")], [gate_call("b")], [gate_call("c")]]) as w:
        agent_a, agent_b = await w.root(), await w.root()
        c = await w.offline()
        runs = [asyncio.ensure_future(agent_a.run("x")), asyncio.ensure_future(agent_b.run("y"))]
        await entered("a")
        await entered("b")
        for i in range(10):
            sender, to = (agent_a, agent_b.session_id) if i % 2 else (agent_b, agent_a.session_id)
            await w.send(sender, to, f"m{i}")
        for sender, to in ((agent_a, agent_b.session_id), (agent_b, agent_a.session_id)):
            text_ = await rejected(w.send(sender, to), "AGENT_MESSAGE_RATE_LIMITED")
            assert text_ == "at most 10 messages per 60 seconds between the same two sessions; try again later"
        w.spy_resume()
        w.fail_resume.append(RuntimeError("disk on fire"))
        await rejected(w.send(agent_a, c), "AGENT_MESSAGE_RESUME_FAILED")
        for i in range(10):
            await w.send(agent_a, c, f"c{i}")
        await rejected(w.send(agent_a, c), "AGENT_MESSAGE_RATE_LIMITED")
        for run in runs:
            run.cancel()


async def test_10_unknown_session_and_failed_resume_write_nothing() -> None:
    async with world([]) as w:
        agent_a = await w.root()
        c = await w.offline()
        missing = new_id()
        assert (
            await rejected(w.send(agent_a, missing), "AGENT_MESSAGE_UNKNOWN_SESSION") == f"session not found: {missing}"
        )
        before = await w.events(c)
        w.spy_resume()
        w.fail_resume.append(RuntimeError("disk on fire"))
        text_ = await rejected(w.send(agent_a, c), "AGENT_MESSAGE_RESUME_FAILED")
        assert text_ == f"could not resume session {c}: disk on fire"
        assert await w.events(c) == before
        assert w.live(c) is None


async def test_11_receipts_survive_a_restart_without_resuming_the_target(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    async with world([[text("pong")]], dsh_home=home) as w:
        agent_a, agent_b = await w.root(), await w.root()
        a, b = agent_a.session_id, agent_b.session_id
        sent = await w.send(agent_a, b)
        await until(lambda: turns(agent_b.events) == 1)
    async with world([], dsh_home=home) as w:
        agent_a = await w.host.resume_agent(a)
        check = await w.check(agent_a, b, sent["messageId"])
        assert check["entries"] == [
            {"messageId": sent["messageId"], "state": "claimed", "targetRuntimeStatus": "offline"}
        ]
        assert w.live(b) is None
        assert (await w.check(agent_a, b))["entries"] == []


async def test_12_unknown_and_foreign_ids_are_unknown() -> None:
    async with world([[text("c")]]) as w:
        agent_a, agent_b, agent_c = await w.root(), await w.root(), await w.root()
        to_c = await w.send(agent_a, agent_c.session_id)
        unknown = new_id()
        assert (await w.check(agent_a, agent_b.session_id, unknown))["entries"] == [
            {"messageId": unknown, "state": "unknown", "targetRuntimeStatus": "idle"}
        ]
        entries = (await w.check(agent_a, agent_b.session_id, to_c["messageId"]))["entries"]
        assert entries == [{"messageId": to_c["messageId"], "state": "unknown", "targetRuntimeStatus": "idle"}]


async def test_13_a_canceled_message_is_discarded() -> None:
    async with world([[gate_call("b")]]) as w:
        agent_a, agent_b = await w.root(), await w.root()
        run = asyncio.ensure_future(agent_b.run("work"))
        await entered("b")
        sent = await w.send(agent_a, agent_b.session_id)
        agent_b.cancel()
        await run
        canceled = [
            e for e in agent_b.events if e["type"] == "agent/inbox/spliced" and e["data"].get("outcome") == "canceled"
        ]
        assert canceled
        assert (await w.check(agent_a, agent_b.session_id, sent["messageId"]))["entries"][0]["state"] == "discarded"


async def test_14_the_sent_map_keeps_the_newest_1000() -> None:
    async with world([[gate_call("b")]], config={"rateLimit": None}) as w:
        agent_a, agent_b = await w.root(), await w.root()
        run = asyncio.ensure_future(agent_b.run("work"))
        await entered("b")
        ids = [(await w.send(agent_a, agent_b.session_id, f"m{i}"))["messageId"] for i in range(1001)]
        bulk = (await w.check(agent_a, agent_b.session_id))["entries"]
        assert [e["messageId"] for e in bulk] == ids[1:]
        assert all(e["state"] == "pending" and "sentAt" in e and e["mode"] == "followup" for e in bulk)
        first = (await w.check(agent_a, agent_b.session_id, ids[0]))["entries"]
        assert first == [{"messageId": ids[0], "state": "pending", "targetRuntimeStatus": "running"}]
        run.cancel()


async def test_15_list_peer_agents_orders_peers_and_hides_archived_and_subagents() -> None:
    async with world([[text("a")], [gate_call("b")], [text("d")]]) as w:
        agent_a = await w.root()
        await agent_a.run("alpha")
        agent_b = await w.root()
        run = asyncio.ensure_future(agent_b.run("bravo"))
        await entered("b")
        fork = await w.fork(agent_a)
        sub = await w.subagent(agent_a)
        c = await w.offline()
        agent_d = await w.root()
        await agent_d.run("delta")
        ARCHIVED.add(agent_d.session_id)
        outcome = await w.call(agent_a, "list_peer_agents", {})
        rows = json.loads(outcome.content[0]["text"])
        assert rows == outcome.meta
        cwd = w.host.cwd

        def row(sid: str, title: str, status: str) -> dict:
            return {
                "id": sid,
                "title": title,
                "cwd": cwd,
                "status": status,
                "kind": "peer",
                "self": sid == agent_a.session_id,
            }

        idle = sorted([agent_a.session_id, fork.id])
        assert rows == [
            row(agent_b.session_id, "bravo", "running"),
            *(row(sid, "alpha", "idle") for sid in idle),
            row(c, f"(untitled · {c[:8]})", "offline"),
        ]
        ids = [r["id"] for r in rows]
        assert sub.id not in ids and agent_d.session_id not in ids
        release("b")
        await run


async def test_16_no_prompt_section_and_no_runtime_context(tmp_path: Path) -> None:
    session_id = new_id()
    seen = []
    for plugin in (True, False):
        async with world([], plugin=plugin, cwd=str(tmp_path)) as w:
            agent = await w.root(session_id)
            prompt = w.ctx.require(SYSTEM_PROMPT)
            assembly = await prompt.assemble(agent.live)
            names = [t["name"] for t in assembly.tools]
            assert ("send_agent_message" in names) is plugin
            seen.append(
                (prompt.render(assembly), prompt.render_contexts(assembly), [s.name for s in assembly.sections])
            )
            await agent.close()
    assert seen[0] == seen[1]


async def test_a_rejection_reaches_the_model_as_an_error_with_its_code() -> None:
    a = new_id()
    call = {"name": "send_agent_message", "arguments": {"to": a, "content": "me"}}
    async with world([[{"tool_calls": [call]}, text("oh")]]) as w:
        agent_a = await w.root(a)
        run = await agent_a.run("message yourself")
        result = next(e for e in run.events if e["type"] == "tool/result")["data"]
        assert text_of(result["message"]) == "Error: cannot send a message to your own session"
        assert result["message"]["isError"] is True
        assert result["error"]["code"] == "AGENT_MESSAGE_SELF"


async def test_a_disposed_retained_target_is_resumed_again_by_the_next_send() -> None:
    async with world([[text("one"), text("two")]]) as w:
        agent_a = await w.root()
        c = await w.offline()
        w.spy_resume()
        await w.send(agent_a, c, "first")
        live = w.live(c)
        await until(lambda: turns(live.session.events) == 1)
        await live.when_idle()
        await w.ctx.require(AGENTS).handle(c).dispose()
        assert w.live(c) is None
        await w.send(agent_a, c, "second")
        assert len(w.resumes) == 2 and w.live(c) is not None
