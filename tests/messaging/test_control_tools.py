"""send_message / interrupt_agent / list_agents, name resolution, authorization and identity (spec 07 §9, 14–27)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.registry import CreateAgentOptions
from pydsh.contract.agent import AgentOptions
from pydsh.contract.tools import TOOLS, ToolDefinition
from pydsh.session.errors import SessionLogError
from pydsh.session.events import build_event, make_header
from pydsh.session.hooks import SESSION_CREATED
from pydsh.session.keys import SESSION_QUERY, SESSIONS
from pydsh.session.log import Session
from pydsh.subagents.hooks import SUBAGENT_START
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.names import CATALOG
from tests.agent.harness import Host, start_host
from tests.subagents.helpers import bind_in_creation_order, calls, deleg, of_type, quiesce, result_texts, results, tool

DEPTH2 = [{"id": "subagent", "config": {"maxDepth": 2}}]
ROOT_IDENTITY = (
    'You are the root agent. Your name is "lead".\n\n'
    'To message other agents, use send_message({ agent: "<agent-name>", message: "..." }).\n'
    "Use list_agents({}) to find your collaborator agents and their names."
)


def add_wait_tool(host: Host, predicate: Any) -> None:
    """``wait_until``: a tool that waits (bounded) until ``predicate()`` holds."""

    async def body(args: Any, exec: Any) -> str:
        for _ in range(500):
            if predicate():
                return "ready"
            await asyncio.sleep(0.01)
        return "timed out"

    host.kernel.ctx.require(TOOLS).register(
        host.kernel.ctx, ToolDefinition("wait_until", "waits", {"type": "object", "properties": {}}, body)
    )


def snapshot_sections(session: Session) -> list[dict[str, str]]:
    event = next(
        e for e in session.events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "runtime-context"
    )
    return list(event["data"]["source"]["sections"])


def created_children(host: Host) -> list[Session]:
    found: list[Session] = []
    host.kernel.ctx.on(SESSION_CREATED, lambda s: found.append(s) if s.header.get("parentSession") else None)
    return found


async def test_parent_messages_a_settled_child_which_starts_a_new_turn(tmp_path: Path) -> None:
    root_script = [
        calls(deleg("a")),
        {"text": "wait"},
        calls(tool("send_message", agent="agent-1", message="also check tests")),
    ]
    root_script += [{"text": "sent"}, {"text": "thanks"}]
    host = await start_host([root_script, [{"text": "first result"}, {"text": "tests checked"}]])
    children = created_children(host)
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        await quiesce(host)
        assert result_texts(root.session)[1] == "message delivered to agent agent-1"
        assert "messageId" in results(root.session)[1]["meta"]
        child = host.kernel.ctx.require(SESSIONS).get(children[0].id) or children[0]
        store = host.kernel.ctx.require(SESSION_QUERY)
        events = (await store.read_session(children[0].id))["events"]
        splices = [e for e in events if e["type"] == "agent/inbox/spliced" and e["data"]["target"] == "next-step"]
        framed = splices[0]["data"]["inserted"][0]
        assert framed["content"][0]["text"] == "Agent lead sent a message: also check tests"
        assert framed["source"] == {"kind": "agent-message", "form": "relay", "senderSessionId": root.id}
        assert [e["data"]["turn"] for e in events if e["type"] == "turn/start"] == [1, 2]
        assert sum(e["type"] == "subagent/descriptor" for e in events) == 1
        assert len(of_type(root.session, "subagent/catalog")) == 1
        assert child is not None
    finally:
        await host.close()


async def test_child_messages_lead_with_relay_source(tmp_path: Path) -> None:
    host = await start_host(
        [
            [calls(deleg("a")), {"text": "wait"}, {"text": "ack"}, {"text": "ack2"}],
            [calls(tool("send_message", agent="lead", message="done")), {"text": "bye"}],
        ]
    )
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        await quiesce(host)
        relays = [
            e["data"] for e in of_type(root.session, "user/message") if e["data"]["source"]["kind"] == "agent-message"
        ]
        assert relays[0]["content"] == [{"type": "text", "text": "Agent agent-1 sent a message: done"}]
        assert relays[0]["source"]["form"] == "relay"
    finally:
        await host.close()


async def test_tree_names_listing_authorization_and_interrupt(tmp_path: Path) -> None:
    hang = {"kind": "hang"}
    service_ref: dict[str, Any] = {}

    def checker_running() -> bool:
        service = service_ref["service"]
        return any(
            a.agent.status == "running" and a.agent.session.header.get("delegationDepth") == 2
            for a in service.activations.values()
        )

    root_script = [
        calls(deleg("review", name="reviewer")),
        calls(tool("wait_until")),
        calls(
            tool("list_agents", scope="descendants"),
            tool("send_message", agent="reviewer/checker", message="hi"),
            tool("interrupt_agent", agent="reviewer/checker"),
            tool("interrupt_agent", agent="lead"),
            tool("send_message", agent="lead", message="me"),
            tool("send_message", agent="nope", message="x"),
            tool("send_message", agent=str(uuid.uuid4()), message="x"),
            tool("list_agents"),
        ),
        {"text": "done"},
    ] + [{"text": "ack"}] * 4
    reviewer_script = [
        calls(deleg("check", name="checker")),
        {"text": "reviewer waiting"},
        {"text": "r2"},
        {"text": "r3"},
    ]
    host = await start_host([root_script, reviewer_script, [hang]], patches=(DEPTH2,))
    service_ref["service"] = host.kernel.ctx.require(SUBAGENTS)
    add_wait_tool(host, checker_running)
    children = created_children(host)
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        texts = result_texts(root.session)
        listing = texts[2]
        lines = listing.split("\n")
        assert lines[0] == "reviewer [running] parent=lead depth=1 — review" or lines[0].startswith("reviewer [")
        assert lines[1] == "reviewer/checker [running] parent=reviewer depth=2 — check"
        assert all(len(part) < 36 for part in listing.replace("\n", " ").split())
        assert texts[3].startswith('Error: subagent "reviewer/checker" is not a direct child of agent "lead"')
        assert results(root.session)[3]["error"]["code"] == "UNAUTHORIZED"
        assert texts[4] == "interrupt requested for agent reviewer/checker"
        assert results(root.session)[4]["meta"] == {"accepted": True}
        assert texts[5] == 'Error: agent "lead" cannot interrupt itself'
        assert texts[6] == 'Error: agent "lead" cannot send a message to itself'
        assert texts[7] == 'Error: no agent named "nope"; use list_agents({}) to find agent names'
        assert results(root.session)[8]["error"]["code"] == "UNKNOWN_AGENT_NAME"
        assert texts[9].startswith("reviewer [")
        await quiesce(host)
        checker = next(s for s in children if s.header["delegationDepth"] == 2)
        ends = [e["data"]["reason"] for e in checker.events if e["type"] == "turn/end"]
        assert ends[0] == {"kind": "aborted", "reason": {"kind": "parent"}}
        identity = next(s for s in snapshot_sections(checker) if s["name"] == "subagent:identity")
        assert identity["text"].startswith(
            'You are a subagent. Your name is "reviewer/checker". Your parent agent is "reviewer".'
        )
        reviewer = next(s for s in children if s.header["delegationDepth"] == 1)
        notices = [e for e in of_type(reviewer, "user/message") if e["data"]["source"]["kind"] == "subagent-settled"]
        assert (
            notices[0]["data"]["content"][0]["text"]
            == "Background subagent reviewer/checker was stopped before it finished."
        )
        catalog = of_type(reviewer, "subagent/catalog")
        assert catalog[0]["data"]["name"] == "checker"
    finally:
        await host.close()


async def test_sibling_cannot_message_another_child(tmp_path: Path) -> None:
    hang = {"kind": "hang"}
    root_script = [calls(deleg("a")), calls(deleg("b")), {"text": "done"}] + [{"text": "ack"}] * 3
    host = await start_host(
        [root_script, [hang], [calls(tool("send_message", agent="agent-1", message="psst")), {"text": "gave up"}]]
    )
    children = created_children(host)
    bind_in_creation_order(host)
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        for _ in range(300):
            second = [s for s in children if any(e["type"] == "tool/result" for e in s.events)]
            if second:
                break
            await asyncio.sleep(0.01)
        texts = result_texts(second[0])
        assert texts[0] == 'Error: subagent "agent-1" is not a direct child of agent "agent-2"'
        first = next(s for s in children if s is not second[0])
        assert not [
            e for e in first.events if e["type"] == "agent/inbox/spliced" and e["data"]["target"] == "next-step"
        ]
    finally:
        await host.close()


async def test_lead_prefix_resolves_and_settled_interrupt_is_a_noop(tmp_path: Path) -> None:
    root_script = [calls(deleg("a")), {"text": "wait"}]
    root_script += [
        calls(tool("interrupt_agent", agent="agent-1"), tool("send_message", agent="lead/agent-1", message="m"))
    ]
    root_script += [{"text": "done"}] + [{"text": "ack"}] * 3
    host = await start_host([root_script, [{"text": "one"}, {"text": "two"}]])
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        await quiesce(host)
        texts = result_texts(root.session)
        assert texts[1] == "interrupt requested for agent agent-1"
        assert texts[2] == "message delivered to agent agent-1"
    finally:
        await host.close()


async def test_root_identity_follows_approval_policy(tmp_path: Path) -> None:
    host = await start_host([{"text": "hi"}])
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        sections = snapshot_sections(root.session)
        names = [s["name"] for s in sections]
        assert names == ["working-directory:current", "sandbox:policy", "approval:policy", "subagent:identity"]
        assert sections[3]["text"] == ROOT_IDENTITY
    finally:
        await host.close()


async def test_no_identity_without_control_tools(tmp_path: Path) -> None:
    host = await start_host([{"text": "hi"}], patches=([{"id": "agent-messaging", "remove": True}],))
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        assert "subagent:identity" not in [s["name"] for s in snapshot_sections(root.session)]
    finally:
        await host.close()


async def test_restart_then_send_message_cold_resumes_the_child(tmp_path: Path) -> None:
    host = await start_host([[calls(deleg("a")), {"text": "wait"}, {"text": "ack"}], [{"text": "first result"}]])
    children = created_children(host)
    root = (await host.create(tmp_path)).agent
    root_id = root.id
    await host.run(root, "go")
    await quiesce(host)
    child_id = children[0].id
    await host.close()

    again = await start_host(
        [
            [calls(tool("send_message", agent="agent-1", message="more")), {"text": "sent"}, {"text": "ok"}],
            [{"text": "more done"}],
        ]
    )
    starts: list[Any] = []
    again.kernel.ctx.on(SUBAGENT_START, starts.append)
    try:
        handle = await again.agents.resume(root_id)
        root = handle.agent
        await again.run(root, "continue")
        await quiesce(again)
        assert result_texts(root.session)[-1] == "message delivered to agent agent-1"
        events = (await again.kernel.ctx.require(SESSION_QUERY).read_session(child_id))["events"]
        assert sum(e["type"] == "subagent/descriptor" for e in events) == 1
        assert sum(e["type"] == "subagent/catalog" for e in root.session.events) == 1
        headers = [e["data"] for e in events if e["type"] == "request/header"]
        assert headers[-1]["reason"] == "resume"
        assert headers[-1]["header"]["config"]["model"] == "deepseek-v4-flash"
        snaps = [e for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "runtime-context"]
        identity = next(s for s in snaps[0]["data"]["source"]["sections"] if s["name"] == "subagent:identity")
        assert identity["text"].startswith('You are a subagent. Your name is "agent-1". Your parent agent is "lead".')
        assert len(starts) == 1 and starts[0]["id"] == child_id
    finally:
        await again.close()


async def test_one_shot_descriptor_is_not_resumable(tmp_path: Path) -> None:
    root_script = [
        calls(deleg("q", run_in_background=False)),
        calls(tool("send_message", agent="agent-1", message="x")),
        {"text": "done"},
    ]
    host = await start_host([root_script, [{"text": "answer"}]])
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        texts = result_texts(root.session)
        assert texts[1] == (
            'Error: subagent "agent-1" has no supported continuation state and cannot be resumed; '
            "choose a different target"
        )
        assert results(root.session)[1]["error"]["code"] == "NOT_RESUMABLE"
    finally:
        await host.close()


async def test_legacy_member_keeps_its_session_id_as_name(tmp_path: Path) -> None:
    root_script = [
        calls(tool("list_agents")),
        calls(tool("send_message", agent="{{fromRequest:legacy-([0-9a-f-]{36})}}", message="hello")),
        {"text": "done"},
    ]
    host = await start_host([root_script, [{"text": "legacy reply"}]])
    root = (await host.create(tmp_path)).agent
    try:
        descriptor = build_event(
            "subagent/descriptor", 0, 1, {"version": 3, "mode": "continuable", "provider": "spawn", "label": "old"}
        )
        legacy = await host.agents.create(
            CreateAgentOptions(
                cwd=str(tmp_path),
                parent_session=root.id,
                origin="subagent",
                delegation_depth=1,
                prefix_events=[descriptor],
                agent_options=AgentOptions(subagent_depth=1),
            )
        )
        legacy_id = legacy.agent.id
        await legacy.dispose()
        root.session.append(
            "subagent/catalog",
            {"childId": legacy_id, "childCreatedAt": 1, "version": 0, "mode": "continuable", "label": "old"},
        )
        await host.run(root, f"the legacy child is legacy-{legacy_id}")
        texts = result_texts(root.session)
        assert texts[0] == f"{legacy_id} [inactive] — old"
        assert texts[1] == f"message delivered to agent {legacy_id}"
    finally:
        await host.close()


def test_duplicate_catalog_names_are_a_format_error() -> None:
    entry = {"childCreatedAt": 1, "version": 3, "mode": "continuable", "label": "x", "name": "agent-1"}
    events = [
        build_event("subagent/catalog", 0, 1, {"childId": "a", **entry}),
        build_event("subagent/catalog", 1, 1, {"childId": "b", **entry}),
    ]
    session = Session(make_header("p", 1), events)
    with pytest.raises(SessionLogError, match='duplicate catalog name "agent-1"'):
        session.fold(CATALOG)
    assert json.dumps(events[0]["data"])
